package config

import _ "embed"

//go:embed schema.json
var schema []byte

// Schema returns the JSON Schema (draft 2020-12) of the configuration file, as
// published in schema.json beside this file, for editors: YAML language servers
// read it from a modeline such as
//
//	# yaml-language-server: $schema=https://raw.githubusercontent.com/backstop-go/backstop/main/config/schema.json
//
// The schema checks the shape of a file (fields, types, duration strings); only
// Parse checks the values against the library's constructors and the ordering rules.
func Schema() []byte { return append([]byte(nil), schema...) }
