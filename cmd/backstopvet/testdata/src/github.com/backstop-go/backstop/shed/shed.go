package shed

type Options struct{}
type Shedder struct{}

func MustNew(Options) *Shedder { return nil }
