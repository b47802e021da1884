package deadline

import "time"

type Deadline struct{}

func New(time.Duration) (*Deadline, error)        { return nil, nil }
func MustNew(time.Duration) *Deadline             { return nil }
func PerAttempt(time.Duration) (*Deadline, error) { return nil, nil }
func MustPerAttempt(time.Duration) *Deadline      { return nil }
