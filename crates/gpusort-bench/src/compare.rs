//! `gpusort bench --compare OLD.json`: each case's change against a saved run, as hyperfine and
//! criterion show it. Cases match by suite, case name and size; a change counts only where the
//! two runs' ranges (min..max) do not overlap, so noise is not reported as a change.

use std::collections::HashMap;
use std::path::Path;

use super::Case;
use crate::{Error, Result};

/// The saved run: (suite, case, n) -> (median, min, max) seconds, and where it ran.
pub struct Baseline {
    cases: HashMap<(String, String, u64), [f64; 3]>,
    label: String,
}

impl Baseline {
    pub fn load(path: &Path) -> Result<Baseline, Error> {
        let bad = |why: String| Error::usage(format!("--compare {}: {why}", path.display()));
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| bad(format!("not a bench export ({e})")))?;
        let list = v["cases"]
            .as_array()
            .ok_or_else(|| bad("not a bench export (no cases)".into()))?;
        let mut cases = HashMap::new();
        for c in list {
            let (Some(suite), Some(case), Some(n)) =
                (c["suite"].as_str(), c["case"].as_str(), c["n"].as_u64())
            else {
                continue;
            };
            let s = &c["stats"];
            if let (Some(med), Some(min), Some(max)) = (
                s["median_s"].as_f64(),
                s["min_s"].as_f64(),
                s["max_s"].as_f64(),
            ) {
                if c["skipped"].is_null() && med > 0.0 {
                    cases.insert((suite.into(), case.into(), n), [med, min, max]);
                }
            }
        }
        let text = |k: &str| v[k].as_str().unwrap_or("?").to_string();
        Ok(Baseline {
            label: format!(
                "{} on {}, gpusort {} ({})",
                text("date"),
                text("device"),
                text("gpusort_version"),
                text("commit")
            ),
            cases,
        })
    }
}

/// One case's change: the new median over the old, and whether the ranges tell them apart.
pub fn change(old: [f64; 3], new: [f64; 3]) -> (f64, &'static str) {
    let ratio = new[0] / old[0];
    let verdict = if new[1] > old[2] {
        "slower"
    } else if new[2] < old[1] {
        "faster"
    } else {
        "within noise"
    };
    (ratio, verdict)
}

pub fn print(baseline: &Baseline, cases: &[Case]) {
    let rows: Vec<String> = cases
        .iter()
        .filter(|c| c.skipped.is_none() && c.stats.median_s > 0.0)
        .filter_map(|c| {
            let old = baseline
                .cases
                .get(&(c.suite.clone(), c.case.clone(), c.n))?;
            let new = [c.stats.median_s, c.stats.min_s, c.stats.max_s];
            let (ratio, verdict) = change(*old, new);
            Some(format!(
                "  {:<36} {:>12}  {:>10} -> {:>10}  {:>+7.1}%  {verdict}",
                truncate(&c.case, 36),
                format!("2^{}", c.n.max(1).ilog2()),
                super::fmt_time(old[0]),
                super::fmt_time(new[0]),
                (ratio - 1.0) * 100.0
            ))
        })
        .collect();
    if rows.is_empty() {
        println!("  (no case of this suite in {})", baseline.label);
        return;
    }
    println!("  compared with {}:", baseline.label);
    for r in rows {
        println!("{r}");
    }
}

fn truncate(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(width - 1).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::change;

    #[test]
    fn changes_count_only_outside_the_noise() {
        assert_eq!(change([1.0, 0.9, 1.1], [2.0, 1.9, 2.1]), (2.0, "slower"));
        assert_eq!(change([1.0, 0.9, 1.1], [0.5, 0.45, 0.55]), (0.5, "faster"));
        assert_eq!(change([1.0, 0.9, 1.1], [1.05, 0.95, 1.2]).1, "within noise");
    }
}
