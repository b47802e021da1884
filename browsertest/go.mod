module github.com/backstop-go/backstop/browsertest

go 1.26.0

replace github.com/backstop-go/backstop => ../

require (
	github.com/backstop-go/backstop v0.0.0-00010101000000-000000000000
	github.com/chromedp/cdproto v0.160.1
	github.com/chromedp/chromedp v0.23.1
)

require (
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
)
