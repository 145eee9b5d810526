package report

import (
	"bytes"
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Series is one line of a plot.
type Series struct {
	Name string
	X, Y []float64
}

// palette is a colour-blind-safe set (Okabe–Ito).
var palette = []color.Color{
	color.RGBA{0, 114, 178, 255}, color.RGBA{213, 94, 0, 255}, color.RGBA{0, 158, 115, 255},
	color.RGBA{204, 121, 167, 255}, color.RGBA{230, 159, 0, 255}, color.RGBA{86, 180, 233, 255},
	color.RGBA{0, 0, 0, 255}, color.RGBA{240, 228, 66, 255},
}

// LinePlot renders series as an SVG line chart.
func LinePlot(title, xlabel, ylabel string, series []Series) ([]byte, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	for i, s := range series {
		if len(s.X) != len(s.Y) {
			return nil, fmt.Errorf("plot %q: series %q has %d x and %d y values", title, s.Name, len(s.X), len(s.Y))
		}
		xys := make(plotter.XYs, len(s.X))
		for k := range s.X {
			xys[k].X, xys[k].Y = s.X[k], s.Y[k]
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("plot %q: %w", title, err)
		}
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1.5)
		p.Add(l)
		if s.Name != "" {
			p.Legend.Add(s.Name, l)
		}
	}
	return render(p)
}

// Bar is one group of a bar chart.
type Bar struct {
	Name   string
	Values []float64
}

// BarPlot renders grouped bars (one group per label, one bar per Bar) as SVG.
func BarPlot(title, ylabel string, labels []string, bars []Bar) ([]byte, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	w := vg.Points(60 / float64(max(len(bars), 1)))
	for i, b := range bars {
		if len(b.Values) != len(labels) {
			return nil, fmt.Errorf("plot %q: bar %q has %d values for %d labels", title, b.Name, len(b.Values), len(labels))
		}
		bc, err := plotter.NewBarChart(plotter.Values(b.Values), w)
		if err != nil {
			return nil, fmt.Errorf("plot %q: %w", title, err)
		}
		bc.Color = palette[i%len(palette)]
		bc.LineStyle.Width = 0
		bc.Offset = w * vg.Length(float64(i)-float64(len(bars)-1)/2)
		p.Add(bc)
		p.Legend.Add(b.Name, bc)
	}
	p.NominalX(labels...)
	return render(p)
}

func render(p *plot.Plot) ([]byte, error) {
	wt, err := p.WriterTo(7*vg.Inch, 4*vg.Inch, "svg")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
