// Package jitter is Backstop's one seam for randomness. Every stage that draws
// jitter takes a [Rand] in its Options; nil means math/rand/v2's global source.
// [Seeded] makes a simulation, a chaos run or a replay reproducible.
package jitter
