package tdx

import (
	"context"
	"errors"

	"github.com/google/go-tdx-guest/client"
)

// Quote asks this TD's TDX guest device for a quote over reportData, through
// go-tdx-guest's client: configfs-tsm (/sys/kernel/config/tsm/report) when the
// kernel offers it, otherwise the /dev/tdx_guest ioctl. The result is the raw
// quote Verify accepts. Without a TDX guest device the error is an *Error of
// class ErrNoDevice. The context is checked before the (blocking, not
// cancellable) device call.
func Quote(ctx context.Context, reportData [64]byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var provider any
	qp, err := client.GetQuoteProvider()
	if err == nil {
		err = qp.IsSupported()
	}
	if err == nil {
		provider = qp
	} else {
		dev, derr := client.OpenDevice()
		if derr != nil {
			return nil, &Error{Check: CheckDevice, Class: ErrNoDevice, Err: errors.Join(err, derr)}
		}
		defer dev.Close()
		provider = dev
	}
	raw, err := client.GetRawQuote(provider, reportData)
	if err != nil {
		return nil, &Error{Check: CheckDevice, Class: ErrNoDevice, Err: err}
	}
	return raw, nil
}
