package store

// PrefetchAhead exports prefetchAhead to the tests.
const PrefetchAhead = prefetchAhead
