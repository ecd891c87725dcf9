package explorertest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// errNoBrowser is returned by Chromium when no browser is installed.
var errNoBrowser = errors.New("no chromium found: install it (scripts/setup.sh does: apt-get install chromium) or set $CHROME")

// Chromium finds a headless-capable browser: $CHROME, else chromium,
// chromium-browser or google-chrome on the PATH.
func Chromium() (string, error) {
	if p := os.Getenv("CHROME"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errNoBrowser
}

// Browser is one tab of a headless chromium.
type Browser struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	errors []string // uncaught exceptions, console.error calls and error log entries
}

// NewBrowser starts the browser at path, headless; Close stops it.
func NewBrowser(ctx context.Context, path string) (*Browser, error) {
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU)...)
	tab, cancelTab := chromedp.NewContext(alloc)
	b := &Browser{ctx: tab, cancel: func() { cancelTab(); cancelAlloc() }}
	if err := chromedp.Do(tab); err != nil { // starts it
		b.Close()
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	if err := chromedp.Listen(tab, func(ev any) {
		var msg string
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg = "exception: " + ev.ExceptionDetails.Text
			if e := ev.ExceptionDetails.Exception; e != nil {
				msg += " " + e.Description
			}
		case *runtime.EventConsoleAPICalled:
			if ev.Type != runtime.ConsoleAPICalledTypeError {
				return
			}
			msg = "console.error:"
			for _, a := range ev.Args {
				msg += " " + cmp.Or(a.Description, string(a.Value))
			}
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level != cdplog.EntryLevelError {
				return
			}
			msg = fmt.Sprintf("%s error: %s (%s)", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL)
		default:
			return
		}
		b.mu.Lock()
		b.errors = append(b.errors, msg)
		b.mu.Unlock()
	}); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Errors returns the page's errors since the last call: uncaught
// exceptions, console.error calls and error entries of the browser's log
// (a failed request among them).
func (b *Browser) Errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.errors
	b.errors = nil
	return out
}

// Close stops the browser.
func (b *Browser) Close() { b.cancel() }

// Viewport sets the page's size in CSS pixels; mobile makes it a phone
// (the viewport meta tag applies, touch events).
func (b *Browser) Viewport(width, height int64, mobile bool) error {
	var opts []chromedp.EmulateViewportOption
	if mobile {
		opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateTouch)
	}
	return chromedp.Do(b.ctx, chromedp.EmulateViewport(width, height, opts...))
}

// Load opens url and waits, at most timeout, for the explorer's first
// render from its stream (window.explorer.renders, static/app.js). It
// returns the time from the start of the navigation to that render, by the
// page's own clock.
func (b *Browser) Load(url string, timeout time.Duration) (time.Duration, error) {
	if err := chromedp.Do(b.ctx, chromedp.Navigate(url)); err != nil {
		return 0, err
	}
	if err := b.WaitFor("window.explorer && window.explorer.renders > 0", timeout); err != nil {
		return 0, fmt.Errorf("%s never rendered: %w", url, err)
	}
	ms, err := Eval[float64](b, "window.explorer.lastRender - performance.timeOrigin")
	return time.Duration(ms * float64(time.Millisecond)), err
}

// WaitFor waits for a JavaScript expression to be truthy.
func (b *Browser) WaitFor(expr string, timeout time.Duration) error {
	_, err := chromedp.Run(b.ctx, chromedp.Poll[any](expr, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(10*time.Millisecond)))
	return err
}

// Eval evaluates a JavaScript expression in the page.
func Eval[T any](b *Browser, expr string) (T, error) {
	return chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
}

// Screenshot is a PNG of the whole page.
func (b *Browser) Screenshot() ([]byte, error) {
	return chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
}
