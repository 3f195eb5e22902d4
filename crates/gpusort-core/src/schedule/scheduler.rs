//! The [`Scheduler`]: the merged kernel built once per block capacity, batches recorded and run
//! (merged or safe).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::device::kernel::{self, BindLayout, ParamBlocks, Slot};
use crate::device::transfer;
use crate::device::Gpu;
use crate::error::{Error, Result};

use super::batch::*;

use super::plan::*;
use super::reference::{reference, self_test_batch};
use super::wgsl::merged;

/// Builds the merged kernel once per block capacity; records and runs batches.
pub struct Scheduler {
    layout: BindLayout,
    pipelines: Mutex<HashMap<u32, Arc<wgpu::ComputePipeline>>>,
    mode: Mode,
    spin_limit: u32,
    proven: OnceLock<bool>,
}

/// Reads a waiting block makes of its producer's mark before it defers. NVIDIA runs started
/// workgroups concurrently and producers hold lower tickets, so waits end within a few reads;
/// the bound matters where workgroups do not progress.
pub const DEFAULT_SPIN_LIMIT: u32 = 1 << 14;

impl Scheduler {
    pub fn new(gpu: &Gpu) -> Result<Scheduler> {
        let layout = BindLayout::new(
            gpu,
            "merged launch",
            &[
                (0, Slot::params::<Params>()),
                (1, Slot::Read),
                (2, Slot::ReadWrite),
                (3, Slot::ReadWrite),
                (4, Slot::ReadWrite),
            ],
        );
        Ok(Scheduler {
            layout,
            pipelines: Mutex::new(HashMap::new()),
            mode: Mode::Auto,
            spin_limit: DEFAULT_SPIN_LIMIT,
            proven: OnceLock::new(),
        })
    }

    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Bound on a waiting block's reads (0: every block with a producer defers at once; tests).
    pub fn with_spin_limit(mut self, reads: u32) -> Self {
        self.spin_limit = reads;
        self.pipelines = Mutex::new(HashMap::new());
        self
    }

    fn pipeline(&self, gpu: &Gpu, cap: u32) -> Result<Arc<wgpu::ComputePipeline>> {
        let mut cache = self.pipelines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = cache.get(&cap) {
            return Ok(p.clone());
        }
        let source = merged(cap, self.spin_limit);
        let module = kernel::module(gpu, "merged launch", &source)?;
        let p = Arc::new(kernel::pipeline(gpu, &module, "run", &self.layout)?);
        cache.insert(cap, p.clone());
        Ok(p)
    }

    /// The mode a launch of `levels` dependency levels runs in on `gpu` (`Auto` resolved; the
    /// self-test runs the first time a deep launch asks).
    pub fn launch_mode(&self, gpu: &Gpu, levels: usize) -> Result<Mode> {
        Ok(match self.mode {
            Mode::Auto => {
                if levels >= MERGED_FROM_LEVELS && self.merged_proven(gpu)? {
                    Mode::Merged
                } else {
                    Mode::Safe
                }
            }
            m => m,
        })
    }

    /// Whether the merged launch gave the CPU reference's results on this device: a batch of
    /// dependent multi-block sorts and scans, run once per scheduler (a few milliseconds).
    pub fn merged_proven(&self, gpu: &Gpu) -> Result<bool> {
        if let Some(&p) = self.proven.get() {
            return Ok(p);
        }
        let (batch, data) = self_test_batch();
        let mut got = data.clone();
        let probe = Scheduler::new(gpu)?
            .with_mode(Mode::Merged)
            .with_spin_limit(self.spin_limit);
        probe.run_host(gpu, &batch, &mut got)?;
        let ok = got == reference(&batch, &data);
        tracing::info!(ok, "merged-launch self-test");
        Ok(*self.proven.get_or_init(|| ok))
    }

    /// Record `batch` on `data` (u32 words, at least `batch.words()`, `BufferUsages::STORAGE`)
    /// into `encoder`; nothing is submitted.
    pub fn record(
        &self,
        gpu: &Gpu,
        encoder: &mut wgpu::CommandEncoder,
        batch: &Batch,
        data: &wgpu::Buffer,
    ) -> Result<(RunStats, Recorded)> {
        let ex = expand(batch, data.size() / 4)?;
        let plan = ex
            .graph
            .plan()
            .map_err(|e| Error::InvalidInput(e.to_string()))?;
        let lay = lay_out(&ex, &plan);
        let mut stats = RunStats {
            mode: Mode::Safe,
            tasks: batch.tasks.len(),
            phases: ex.phases.len(),
            launches: plan.launches.len(),
            blocks: plan.slots(),
            ..RunStats::default()
        };
        let plan_buf = transfer::buffer_from(gpu, "merged plan", &lay.plan_words)?;
        let state = transfer::storage_buffer(gpu, "merged state", lay.state_words * 4)?;
        let args_bytes: &[u8] = bytemuck::cast_slice(&lay.args_words);
        let args = transfer::indirect_buffer(gpu, "merged resume args", args_bytes.len() as u64)?;
        transfer::upload(gpu, &args, 0, args_bytes)?;
        // resume dispatches read `args` as INDIRECT, so they bind a stand-in for it (they never
        // defer, so never write it)
        let no_args = transfer::storage_buffer(gpu, "merged resume no args", 16)?;
        let mut params = ParamBlocks::new(gpu);
        // (pipeline cap, params offset, how to dispatch)
        enum Launch {
            Groups(u32),
            Indirect(u64),
        }
        let mut dispatches: Vec<(u32, u32, Launch)> = Vec::new();
        for l in &lay.launches {
            let mode = self.launch_mode(gpu, l.levels.len())?;
            if mode == Mode::Merged {
                stats.mode = Mode::Merged;
                stats.merged_launches += 1;
            }
            match mode {
                Mode::Safe => {
                    for r in &l.levels {
                        let p = Params {
                            mode: MODE_LEVEL,
                            begin: r.start,
                            end: r.end,
                            ..l.base
                        };
                        dispatches.push((l.cap, params.push(&p), Launch::Groups(r.end - r.start)));
                    }
                }
                _ => {
                    let p = Params {
                        mode: MODE_MERGED,
                        ..l.base
                    };
                    dispatches.push((l.cap, params.push(&p), Launch::Groups(l.slots)));
                    let p = Params {
                        mode: MODE_RESUME,
                        ..l.base
                    };
                    let at = l.base.args_at as u64 * 4;
                    dispatches.push((l.cap, params.push(&p), Launch::Indirect(at)));
                }
            }
        }
        let params = params.finish(gpu, "merged params");
        stats.dispatches = dispatches.len();
        let pipelines: HashMap<u32, Arc<wgpu::ComputePipeline>> = lay
            .launches
            .iter()
            .map(|l| Ok((l.cap, self.pipeline(gpu, l.cap)?)))
            .collect::<Result<_>>()?;
        gpu.checked(|| {
            let with_args = self
                .layout
                .bind(gpu, &[&params, &plan_buf, &state, &args, data]);
            let without_args = self
                .layout
                .bind(gpu, &[&params, &plan_buf, &state, &no_args, data]);
            encoder.clear_buffer(&state, 0, None);
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("merged launch"),
                timestamp_writes: None,
            });
            for (cap, offset, launch) in &dispatches {
                let pipeline = &pipelines[cap];
                match *launch {
                    Launch::Groups(groups) => {
                        kernel::dispatch(gpu, &mut pass, pipeline, &with_args, &[*offset], groups)
                    }
                    Launch::Indirect(at) => {
                        pass.set_pipeline(pipeline);
                        pass.set_bind_group(0, &without_args, &[*offset]);
                        pass.dispatch_workgroups_indirect(&args, at);
                    }
                }
            }
        })?;
        Ok((
            stats,
            Recorded {
                state,
                deferred_at: lay.launches.iter().map(|l| l.base.deferred_at).collect(),
            },
        ))
    }

    /// Run `batch` on host data (u32 words) and wait: upload, one submit, download.
    pub fn run_host(&self, gpu: &Gpu, batch: &Batch, data: &mut [u32]) -> Result<RunStats> {
        if data.len() as u64 * 4 > gpu.max_binding() {
            return Err(Error::TooLarge(format!(
                "{} data words exceed one {} MiB binding on {}",
                data.len(),
                gpu.max_binding() >> 20,
                gpu.adapter.name
            )));
        }
        let buf = transfer::buffer_from(gpu, "merged data", data)?;
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        let (mut stats, recorded) = self.record(gpu, &mut encoder, batch, &buf)?;
        gpu.queue.submit([encoder.finish()]);
        gpu.wait()?;
        transfer::download(gpu, &buf, 0, bytemuck::cast_slice_mut(data))?;
        stats.deferred = recorded.deferred(gpu)?;
        Ok(stats)
    }
}

/// What a recording leaves to inspect after it ran.
pub struct Recorded {
    state: wgpu::Buffer,
    deferred_at: Vec<u32>,
}

impl Recorded {
    /// Blocks the merged launches deferred to their resume dispatches (after the work is done).
    pub fn deferred(&self, gpu: &Gpu) -> Result<u64> {
        let mut total = 0;
        for &at in &self.deferred_at {
            let mut count = [0u32];
            transfer::download(
                gpu,
                &self.state,
                at as u64 * 4,
                bytemuck::cast_slice_mut(&mut count),
            )?;
            total += count[0] as u64;
        }
        Ok(total)
    }
}
