package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Source names one dataset: a local directory or a data server URL, the
// root to pin (required for a server), and its weight in a mix.
type Source struct {
	Location string `json:"location"`
	Root     string `json:"root,omitempty"`
	Weight   uint32 `json:"weight,omitempty"`
}

// ParseSources decodes a JSON list of sources, the form a mix is configured in:
//
//	[{"location": "http://data.example:8123/", "root": "ab12...", "weight": 3},
//	 {"location": "/data/validation", "weight": 1}]
func ParseSources(data []byte) ([]Source, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var sources []Source
	if err := dec.Decode(&sources); err != nil {
		return nil, fmt.Errorf("data sources: %w", err)
	}
	if dec.More() {
		return nil, errors.New("data sources: trailing data after the JSON list")
	}
	if len(sources) == 0 {
		return nil, errors.New("data sources: the list is empty")
	}
	for i, s := range sources {
		if s.Location == "" {
			return nil, fmt.Errorf("data sources: entry %d has no location", i)
		}
		if len(sources) > 1 && s.Weight == 0 {
			return nil, fmt.Errorf("data sources: entry %d (%s) needs a positive weight in a mix", i, s.Location)
		}
	}
	return sources, nil
}

// Open opens one source, or a weighted mix of several. Locations starting
// with http:// or https:// are data servers (opts configures them, with the
// source's Root); anything else is a local dataset directory.
func Open(ctx context.Context, sources []Source, opts HTTPOptions) (Provider, error) {
	if len(sources) == 0 {
		return nil, errors.New("no data source given")
	}
	var parts []Weighted
	closeAll := func() {
		for _, p := range parts {
			p.Provider.Close()
		}
	}
	for _, s := range sources {
		var p Provider
		var err error
		if strings.HasPrefix(s.Location, "http://") || strings.HasPrefix(s.Location, "https://") {
			o := opts
			o.Root = s.Root
			p, err = OpenHTTP(ctx, s.Location, o)
		} else {
			p, err = OpenLocal(s.Location, s.Root)
		}
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("data source %s: %w", s.Location, err)
		}
		parts = append(parts, Weighted{p, s.Weight})
	}
	if len(parts) == 1 {
		return parts[0].Provider, nil
	}
	mix, err := NewMix(parts)
	if err != nil {
		closeAll()
		return nil, err
	}
	return mix, nil
}
