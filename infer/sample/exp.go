package sample

import "math"

// expDet returns e**x for x ≤ 0 (larger x are clamped to 0) with an error
// below 2 ulp, computed identically on every platform: every
// multiplication is rounded by an explicit conversion, which the Go
// specification says prevents fusing into FMA.
func expDet(x float64) float64 {
	switch {
	case math.IsNaN(x):
		return 0
	case x > 0:
		x = 0
	case x < -745.2:
		return 0
	}
	const (
		ln2Hi  = 6.93147180369123816490e-01 // high bits of ln 2 (exact k*ln2Hi for |k| < 2^11)
		ln2Lo  = 1.90821492927058770002e-10 // ln 2 - ln2Hi
		invLn2 = 1.44269504088896338700e+00
	)
	k := math.Floor(float64(x*invLn2) + 0.5)
	r := float64(x-float64(k*ln2Hi)) - float64(k*ln2Lo)
	// Taylor series of e**r for |r| ≤ ln2/2, degree 13: truncation error
	// below 5e-18, well under one ulp of the result.
	p := 1.0 / 6227020800.0 // 1/13!
	for _, c := range expCoef {
		p = float64(p*r) + c
	}
	return math.Ldexp(p, int(k))
}

// expCoef holds 1/12!, 1/11!, ..., 1/1!, 1/0! for expDet's Horner loop.
var expCoef = [...]float64{
	1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880,
	1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6,
	1.0 / 2, 1, 1,
}
