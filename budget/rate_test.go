package budget_test

import "golang.org/x/time/rate"

func rateLimit(r float64) rate.Limit { return rate.Limit(r) }
