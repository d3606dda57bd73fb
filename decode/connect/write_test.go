package connect

import "testing"

func TestAppendJavaDouble(t *testing.T) {
	// Java's Double.toString of each (Java 19+, the shortest digits).
	for f, want := range map[float64]string{
		0: "0.0", 1: "1.0", 100: "100.0", 9.99: "9.99", 1e7: "1.0E7", 9999999.5: "9999999.5", 0.001: "0.001",
		0.00099: "9.9E-4", 1e100: "1.0E100", 1.2345e-5: "1.2345E-5", 123456789012: "1.23456789012E11", -2.5: "-2.5",
	} {
		if got := string(appendJavaDouble(nil, f)); got != want {
			t.Errorf("appendJavaDouble(%v) = %s, want %s", f, got, want)
		}
	}
}
