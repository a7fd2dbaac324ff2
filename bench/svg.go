package main

import (
	"os"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/vgsvg"
)

func vgSVG(w, h vg.Length) *vgsvg.Canvas { return vgsvg.New(w, h) }

func saveSVG(c *vgsvg.Canvas, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
