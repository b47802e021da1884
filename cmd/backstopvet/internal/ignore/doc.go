// Package ignore reads the comments that silence a backstopvet check on one statement:
//
//	//backstopvet:ignore CHECK (why)
//
// on the line above the statement or at the end of its first line.
package ignore
