//! `gpusort info`: every adapter, the chosen one, and the limits that matter.

use gpusort_core::device::{list_adapters, AdapterSummary};

use crate::error::CliResult;
use crate::{Engine, Global};

#[derive(clap::Args, Debug)]
pub struct InfoArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

fn mib(b: u64) -> String {
    format!("{} MiB", b >> 20)
}

pub fn run(g: &Global, args: &InfoArgs) -> CliResult {
    let options = g.gpu_options();
    let adapters = list_adapters(&options)?;
    let engine = match g.engine()? {
        Engine::Cpu { why } => Engine::cpu_words(why),
        Engine::Gpu => "the GPU".to_string(),
    };
    if adapters.is_empty() {
        if args.json {
            let v = serde_json::json!({ "adapters": [], "jobs_run_on": engine });
            println!(
                "{}",
                serde_json::to_string_pretty(&v).expect("serialisable")
            );
        } else {
            println!("adapters: none (no GPU driver found)\njobs run on: {engine}");
        }
        return Ok(());
    }
    // with --devices: the adapters a job would use, one a device
    let devices: Vec<String> = match (g.several_devices()?, g.device_selectors()?) {
        (true, Some(sel)) => sel
            .iter()
            .map(|s| {
                let needle = s.to_ascii_lowercase();
                let a = match s.parse::<usize>() {
                    Ok(i) => adapters.iter().find(|a| a.index == i),
                    Err(_) => adapters
                        .iter()
                        .find(|a| a.name.to_ascii_lowercase().contains(&needle)),
                };
                match a {
                    Some(a) => format!("[{}] {}", a.index, a.name),
                    None => format!("'{s}': no such adapter"),
                }
            })
            .collect(),
        _ => Vec::new(),
    };
    let gpu = g.gpu()?;
    let chosen: &AdapterSummary = &gpu.adapter;
    let subgroups_used = gpu.subgroups().is_some();
    if args.json {
        let v = serde_json::json!({
            "adapters": adapters,
            "chosen": chosen,
            "subgroups_in_use": subgroups_used,
            "host_memory_import": gpu.host_memory_import(),
            "tuning": tuning_words(&gpu),
            "jobs_run_on": engine,
            "devices": devices,
            "limits": {
                "max_buffer_size": gpu.limits.max_buffer_size,
                "max_storage_buffer_binding_size": gpu.limits.max_storage_buffer_binding_size,
                "max_compute_workgroup_storage_size": gpu.limits.max_compute_workgroup_storage_size,
                "max_compute_invocations_per_workgroup": gpu.limits.max_compute_invocations_per_workgroup,
                "max_compute_workgroups_per_dimension": gpu.limits.max_compute_workgroups_per_dimension,
            },
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).expect("serialisable")
        );
        return Ok(());
    }
    println!("adapters:");
    for a in &adapters {
        let mark = if a.index == chosen.index && a.name == chosen.name {
            "*"
        } else {
            " "
        };
        println!(
            "  {mark} [{}] {} ({}, {}, driver: {} {})",
            a.index, a.name, a.backend, a.device_type, a.driver, a.driver_info
        );
    }
    println!("chosen: [{}] {}", chosen.index, chosen.name);
    println!("tuning: {}", tuning_words(&gpu));
    println!("jobs run on: {engine}");
    if !devices.is_empty() {
        println!(
            "devices: {} ({} devices for one job: sorts split by key range, scans and splits in parts, stencils in slabs)",
            devices.join(", "),
            devices.len()
        );
    }
    if chosen.subgroups {
        println!(
            "subgroups: supported, size {}..{}{}",
            chosen.subgroup_min_size,
            chosen.subgroup_max_size,
            if subgroups_used {
                ""
            } else {
                " (disabled by --no-subgroups)"
            }
        );
    } else {
        println!("subgroups: not supported (workgroup-memory paths in use)");
    }
    println!(
        "timestamps: {}",
        if gpu.timestamps() { "yes" } else { "no" }
    );
    println!(
        "host transfers: {}",
        if gpu.host_memory_import() {
            "staged through imported host memory (VK_EXT_external_memory_host)"
        } else {
            "staged through mapped buffers"
        }
    );
    println!("max buffer size: {}", mib(gpu.limits.max_buffer_size));
    println!(
        "max storage binding: {}",
        mib(gpu.limits.max_storage_buffer_binding_size)
    );
    println!(
        "workgroup storage: {} KiB",
        gpu.limits.max_compute_workgroup_storage_size / 1024
    );
    println!(
        "invocations per workgroup: {}",
        gpu.limits.max_compute_invocations_per_workgroup
    );
    println!(
        "workgroups per dimension: {}",
        gpu.limits.max_compute_workgroups_per_dimension
    );
    Ok(())
}

/// Whether a stored tuning (`gpusort tune`) is in use for this device.
fn tuning_words(gpu: &gpusort_core::Gpu) -> String {
    let file = crate::tuning::file();
    match crate::tuning::stored(gpu) {
        Some(t) => format!(
            "measured by `gpusort tune` on {} ({})",
            t.date,
            file.map(|f| f.display().to_string()).unwrap_or_default()
        ),
        None => "the defaults (`gpusort tune` measures this device)".into(),
    }
}
