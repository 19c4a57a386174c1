package egress

import (
	"errors"
	"strconv"
)

// Port checks the port of a URL a client gives for the server or its agent
// to reach (net/url's URL.Port: digits or empty): none, or 1 to 65535. A
// port no connection can use is a mistake to name when the URL is given,
// not a delivery or a download that fails later.
func Port(port string) error {
	if port == "" {
		return nil
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return errors.New("has an invalid port: want 1 to 65535")
	}
	return nil
}
