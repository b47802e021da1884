module github.com/backstop-go/backstop/browsertest

go 1.26.0

require (
	github.com/backstop-go/backstop v0.1.0
	github.com/chromedp/cdproto v0.160.1
	github.com/chromedp/chromedp v0.23.1
)

require (
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
)
