// Command storm will replay a retry storm on loopback: a 3-layer call path whose
// database goes down, run once with naive retries and once with Backstop.
package main

import "fmt"

func main() {
	fmt.Println("storm: the retry-storm demo is not built yet; see examples/README.md")
}
