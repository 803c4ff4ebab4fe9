package store

// PrefetchAhead exports prefetchAhead to the tests.
const PrefetchAhead = prefetchAhead

// CutMark exports cutMark to the tests.
const CutMark = cutMark
