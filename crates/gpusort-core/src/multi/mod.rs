//! Several GPUs as one: a [`DeviceGroup`] and the jobs that spread over it.
//!
//! - [`sort`]: keys split by key range (sampled splitters, one stable partition on the host), each
//!   device sorts one contiguous range of the output; segments go whole to a device.
//! - [`scan`]: scans, compactions and partitions in one part per device; carries and counts are
//!   combined on the host (parallel reductions before the devices start).
//! - [`stencil`]: the grid split along its outermost axis, each part resident on its device with
//!   halos of R·T rows exchanged through host memory every T steps; bit-identical to one device.
//!
//! Data moves between devices through host memory: wgpu has no peer-to-peer copy. A group may
//! hold several devices on one adapter (`--devices 0,0`): that is how the tests run this code on
//! one software adapter.

pub mod scan;
pub mod sort;
pub mod stencil;

use std::sync::Arc;

use crate::device::{list_adapters, Gpu, GpuOptions};
use crate::error::{Error, Result};

/// Which devices a job uses (the CLI's `--devices`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceSpec {
    /// Every hardware adapter (every adapter where there is no hardware one).
    All,
    /// The first N of [`DeviceSpec::All`]'s adapters.
    Count(usize),
    /// Adapter indices or name substrings, in order; one may repeat (several devices on one
    /// adapter).
    List(Vec<String>),
}

/// At most this many devices in one group (the sort's partition keeps bucket ids in a byte).
pub const MAX_DEVICES: usize = 64;

impl DeviceSpec {
    /// `all`, a count (`2`), or a comma-separated list of indices and name substrings (`0,1`,
    /// `0,0`, `h100,h100`).
    pub fn parse(s: &str) -> Result<DeviceSpec> {
        let t = s.trim();
        let bad = |why: &str| Error::InvalidInput(format!("devices '{s}': {why}"));
        if t.eq_ignore_ascii_case("all") {
            return Ok(DeviceSpec::All);
        }
        if !t.contains(',') {
            if let Ok(n) = t.parse::<usize>() {
                return match n {
                    0 => Err(bad(
                        "a count of devices is at least 1 (a list of one index: '0,')",
                    )),
                    n if n > MAX_DEVICES => Err(bad(&format!("at most {MAX_DEVICES} devices"))),
                    n => Ok(DeviceSpec::Count(n)),
                };
            }
        }
        let items: Vec<String> = t
            .split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(String::from)
            .collect();
        if items.is_empty() {
            return Err(bad("expected all, a count, or a list such as 0,1"));
        }
        if items.len() > MAX_DEVICES {
            return Err(bad(&format!("at most {MAX_DEVICES} devices")));
        }
        Ok(DeviceSpec::List(items))
    }

    /// The adapter selectors (index strings or name substrings) this spec names, one per device,
    /// among the adapters `options` sees.
    pub fn selectors(&self, options: &GpuOptions) -> Result<Vec<String>> {
        let adapters = list_adapters(options)?;
        if adapters.is_empty() {
            return Err(Error::NoAdapter(String::new()));
        }
        let hardware = adapters.iter().any(|a| a.is_hardware());
        let mut usable: Vec<usize> = adapters
            .iter()
            .filter(|a| a.is_hardware() || !hardware)
            .map(|a| a.index)
            .collect();
        // the order one device is chosen in: discrete GPUs first (crate::device::choose)
        let rank = |t: &str| match t {
            "DiscreteGpu" => 0,
            "IntegratedGpu" => 1,
            "VirtualGpu" => 2,
            "Other" => 3,
            _ => 4,
        };
        usable.sort_by_key(|&i| (rank(&adapters[i].device_type), i));
        match self {
            DeviceSpec::All => Ok(usable.iter().map(usize::to_string).collect()),
            DeviceSpec::Count(n) if *n > usable.len() => Err(Error::InvalidInput(format!(
                "devices {n}: only {} usable adapter{} ({}); name one twice (0,0) for two devices on one adapter",
                usable.len(),
                if usable.len() == 1 { "" } else { "s" },
                usable
                    .iter()
                    .map(|&i| format!("[{i}] {}", adapters[i].name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
            DeviceSpec::Count(n) => Ok(usable[..*n].iter().map(usize::to_string).collect()),
            DeviceSpec::List(items) => Ok(items.clone()),
        }
    }
}

/// Several devices that run one job together. Device 0 leads: single-device work (and every job
/// of a group of one) runs there, so a group of one behaves exactly as that device alone.
pub struct DeviceGroup {
    gpus: Vec<Arc<Gpu>>,
}

impl std::fmt::Debug for DeviceGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.gpus.iter().map(|g| &g.adapter.name))
            .finish()
    }
}

impl DeviceGroup {
    /// A group of devices the caller made (its own included, through [`Gpu::from_device`]).
    pub fn from_gpus(gpus: Vec<Gpu>) -> Result<DeviceGroup> {
        DeviceGroup::from_shared(gpus.into_iter().map(Arc::new).collect())
    }

    /// A group of devices shared with other groups or with the caller.
    pub fn from_shared(gpus: Vec<Arc<Gpu>>) -> Result<DeviceGroup> {
        if gpus.is_empty() {
            return Err(Error::InvalidInput("a device group needs a device".into()));
        }
        if gpus.len() > MAX_DEVICES {
            return Err(Error::InvalidInput(format!(
                "a device group holds at most {MAX_DEVICES} devices"
            )));
        }
        Ok(DeviceGroup { gpus })
    }

    /// Open the devices `spec` names, with `options` for each (its `adapter` is replaced by each
    /// selector); devices are created in parallel (each takes a driver's start-up time).
    pub fn open(options: &GpuOptions, spec: &DeviceSpec) -> Result<DeviceGroup> {
        let selectors = spec.selectors(options)?;
        let gpus: Vec<Result<Gpu>> = std::thread::scope(|s| {
            let handles: Vec<_> = selectors
                .iter()
                .map(|sel| {
                    let o = GpuOptions {
                        adapter: Some(sel.clone()),
                        ..options.clone()
                    };
                    s.spawn(move || Gpu::new(&o))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("device creation does not panic"))
                .collect()
        });
        DeviceGroup::from_gpus(gpus.into_iter().collect::<Result<Vec<_>>>()?)
    }

    pub fn len(&self) -> usize {
        self.gpus.len()
    }

    pub fn is_empty(&self) -> bool {
        self.gpus.is_empty()
    }

    pub fn gpus(&self) -> &[Arc<Gpu>] {
        &self.gpus
    }

    /// The first `k` devices as a group of their own (a bench's 1..N devices).
    pub fn prefix(&self, k: usize) -> DeviceGroup {
        DeviceGroup {
            gpus: self.gpus[..k.clamp(1, self.gpus.len())].to_vec(),
        }
    }

    /// The lead device.
    pub fn first(&self) -> &Gpu {
        &self.gpus[0]
    }

    /// "NVIDIA H100 80GB HBM3 ×2", or the names in order where they differ.
    pub fn describe(&self) -> String {
        let first = &self.gpus[0].adapter.name;
        if self.gpus.iter().all(|g| &g.adapter.name == first) {
            if self.gpus.len() == 1 {
                first.clone()
            } else {
                format!("{} devices ({first})", self.gpus.len())
            }
        } else {
            let names: Vec<&str> = self.gpus.iter().map(|g| g.adapter.name.as_str()).collect();
            format!("{} devices ({})", self.gpus.len(), names.join(", "))
        }
    }
}

/// `n` items in `parts` contiguous ranges as equal as whole `unit`s allow (the last range takes
/// the remainder); ranges may be empty where there are fewer units than parts.
pub fn split_even(n: usize, parts: usize, unit: usize) -> Vec<std::ops::Range<usize>> {
    let unit = unit.max(1);
    let units = n.div_ceil(unit);
    let parts = parts.max(1);
    (0..parts)
        .map(|p| {
            let a = (units * p / parts * unit).min(n);
            let b = (units * (p + 1) / parts * unit).min(n);
            a..b
        })
        .collect()
}

/// Run `f(device index, item)` for each device on its own thread, items handed out in order;
/// the first error (in device order) wins.
pub(crate) fn on_each<I: Send, R: Send>(
    group: &DeviceGroup,
    items: Vec<I>,
    f: impl Fn(usize, &Gpu, I) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    let f = &f;
    let results: Vec<Result<R>> = std::thread::scope(|s| {
        let handles: Vec<_> = items
            .into_iter()
            .enumerate()
            .map(|(d, item)| {
                let gpu = &group.gpus[d];
                s.spawn(move || f(d, gpu, item))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(r) => r,
                Err(_) => Err(Error::DeviceLost("a device's thread panicked".into())),
            })
            .collect()
    });
    results.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse() {
        assert_eq!(DeviceSpec::parse("all").unwrap(), DeviceSpec::All);
        assert_eq!(DeviceSpec::parse(" 2 ").unwrap(), DeviceSpec::Count(2));
        assert_eq!(
            DeviceSpec::parse("0,0").unwrap(),
            DeviceSpec::List(vec!["0".into(), "0".into()])
        );
        assert_eq!(
            DeviceSpec::parse("0,").unwrap(),
            DeviceSpec::List(vec!["0".into()])
        );
        assert_eq!(
            DeviceSpec::parse("h100,1").unwrap(),
            DeviceSpec::List(vec!["h100".into(), "1".into()])
        );
        assert!(DeviceSpec::parse("0").is_err());
        assert!(DeviceSpec::parse(",").is_err());
        assert!(DeviceSpec::parse("1000").is_err());
    }

    #[test]
    fn even_splits_cover_everything_in_units() {
        for n in [0, 1, 5, 16, 17, 1000, 12345] {
            for parts in 1..5 {
                for unit in [1, 4, 64] {
                    let r = split_even(n, parts, unit);
                    assert_eq!(r.len(), parts);
                    assert_eq!(r[0].start, 0);
                    assert_eq!(r[parts - 1].end, n);
                    for w in r.windows(2) {
                        assert_eq!(w[0].end, w[1].start);
                        assert!(w[0].end == n || w[0].end % unit == 0);
                    }
                }
            }
        }
    }
}
