package builtin

import "testing"

// BenchmarkModule is what a start or reload pays per built-in plugin
// before compiling: decompressing its module.
func BenchmarkModule(b *testing.B) {
	for _, name := range names {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Module(name); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
