package kplug

import (
	"errors"
	"strings"
	"testing"
)

func TestPluginNamesAreDNSLabels(t *testing.T) {
	for _, name := range []string{"a", "0", "postgresql", "my-plugin-2", strings.Repeat("a", 63)} {
		if err := validateName(name); err != nil {
			t.Errorf("%q refused: %v", name, err)
		}
	}
	for _, name := range []string{"", "Demo", "-demo", "demo-", "de_mo", "de.mo", strings.Repeat("a", 64), "dé", "demo\n", "de mo", "../x"} {
		err := validateName(name)
		if !errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), "it must be a DNS label") {
			t.Errorf("%q: %v, want ErrInvalidName", name, err)
		}
	}
}
