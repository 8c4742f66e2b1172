//go:build race

package ingressnginx_test

const raceEnabled = true
