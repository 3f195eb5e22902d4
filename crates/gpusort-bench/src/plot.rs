//! `gpusort bench --plot FILE.svg`: throughput against size, one line per case, one panel per
//! suite and unit (GKeys/s and GB/s never share an axis). People read a plot faster than a table.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

use super::Case;
use crate::{Error, Result};

pub fn write(path: &Path, title: &str, cases: &[Case]) -> Result {
    // (suite, unit) -> case name -> [(log2 n, throughput)], in the order measured
    type Lines = Vec<(String, Vec<(f64, f64)>)>;
    let mut panels: BTreeMap<(String, String), Lines> = BTreeMap::new();
    for c in cases
        .iter()
        .filter(|c| c.skipped.is_none() && c.throughput > 0.0)
    {
        let lines = panels.entry((c.suite.clone(), c.unit.clone())).or_default();
        let point = ((c.n.max(1) as f64).log2(), c.throughput);
        match lines.iter_mut().find(|(name, _)| *name == c.case) {
            Some((_, pts)) => pts.push(point),
            None => lines.push((c.case.clone(), vec![point])),
        }
    }
    let mut svg = String::new();
    let draw = |svg: &mut String| -> Result<(), Box<dyn std::error::Error>> {
        let rows = panels.len().max(1);
        let root = SVGBackend::with_string(svg, (1100, 520 * rows as u32)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(title, ("sans-serif", 18))?;
        for (area, ((suite, unit), lines)) in root.split_evenly((rows, 1)).iter().zip(&panels) {
            let pts = lines.iter().flat_map(|(_, p)| p.iter());
            let (x0, x1) = pts
                .clone()
                .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
            let (y0, y1) = pts.fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
            let mut chart = ChartBuilder::on(area)
                .caption(format!("{suite} ({unit})"), ("sans-serif", 16))
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(64)
                .right_y_label_area_size(0)
                .build_cartesian_2d(x0 - 0.5..x1 + 0.5, (y0 / 1.5..y1 * 1.5).log_scale())?;
            chart
                .configure_mesh()
                .x_desc("log2 of the size")
                .y_desc(unit.as_str())
                .x_labels(((x1 - x0) as usize + 2).min(16))
                .x_label_formatter(&|x| match x.fract().abs() < 1e-9 {
                    true => format!("2^{x:.0}"),
                    false => String::new(),
                })
                .draw()?;
            for (i, (name, p)) in lines.iter().enumerate() {
                let color = Palette99::pick(i).to_rgba();
                chart
                    .draw_series(LineSeries::new(p.iter().copied(), color.stroke_width(2)))?
                    .label(name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                    });
                chart.draw_series(p.iter().map(|&q| Circle::new(q, 3, color.filled())))?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.3))
                .label_font(("sans-serif", 11))
                .draw()?;
        }
        root.present()?;
        Ok(())
    };
    draw(&mut svg).map_err(|e| Error::runtime(format!("--plot: {e}")))?;
    gpusort_files::Output::write_bytes_now(path, svg.as_bytes())?;
    Ok(())
}
