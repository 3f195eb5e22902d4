//! What the Vulkan driver says it made of gpusort's kernels: registers, spills, shared memory and
//! whatever else it reports through `VK_KHR_pipeline_executable_properties` (NVIDIA, Mesa).
//! Occupancy (how many workgroups an SM can hold) follows from those figures, and no profiler on
//! the GPU machine can see Vulkan kernels, so this is how we learn it.
//!
//!     GPUSORT_DUMP_WGSL=/tmp/k gpusort bench --suite sort --sizes 16 --quick   # any run: dumps
//!     cargo run --release --example shader_stats -- /tmp/k [more dirs or .wgsl files]
//!
//! Each `.wgsl` file (as `kernel::module` composed it, constants included) goes through naga to
//! SPIR-V with the options wgpu 30 uses on Vulkan (bounds checks kept, loop bounding off as in
//! `kernel::module`, the device's SPIR-V version and zero-initialisation mode), every entry point
//! becomes a pipeline created with statistics capture, and one line per entry point is printed:
//! the file, the entry point, its workgroup size, the workgroup memory it declares and uses, and
//! the driver's statistics. The SPIR-V is ours, not wgpu's byte for byte (same naga, same
//! options), so treat small differences as noise.

use std::error::Error;
use std::ffi::CStr;
use std::path::{Path, PathBuf};

use ash::vk;
use naga::back::spv;

type Res<T> = std::result::Result<T, Box<dyn Error>>;

struct Device {
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    /// None where the driver lacks the extension (lavapipe): pipelines are still built, which
    /// checks the SPIR-V, but no statistics come back.
    exec: Option<ash::khr::pipeline_executable_properties::Device>,
    name: String,
    options: spv::Options<'static>,
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: every object made from them was destroyed after its use (see `stats`).
        unsafe {
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}

fn open_device() -> Res<Device> {
    // SAFETY: plain Vulkan setup; every pointer handed over lives until the call returns.
    unsafe {
        let entry = ash::Entry::load()?;
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
        let instance = entry.create_instance(
            &vk::InstanceCreateInfo::default().application_info(&app),
            None,
        )?;
        let want = ash::khr::pipeline_executable_properties::NAME;
        let robust = ash::ext::robustness2::NAME;
        let has = |pd: vk::PhysicalDevice, name: &CStr| -> bool {
            instance
                .enumerate_device_extension_properties(pd)
                .unwrap_or_default()
                .iter()
                .any(|e| e.extension_name_as_c_str() == Ok(name))
        };
        // a real GPU before a software one, as gpu.rs chooses
        let mut devices = instance.enumerate_physical_devices()?;
        devices.sort_by_key(|&pd| {
            instance.get_physical_device_properties(pd).device_type == vk::PhysicalDeviceType::CPU
        });
        let pd = *devices.first().ok_or("no Vulkan device")?;
        let capture = has(pd, want);
        let props = instance.get_physical_device_properties(pd);
        let name = props
            .device_name_as_c_str()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let api = props.api_version;

        let mut r2 = vk::PhysicalDeviceRobustness2FeaturesEXT::default();
        let mut f13 = vk::PhysicalDeviceVulkan13Features::default();
        let mut f2 = vk::PhysicalDeviceFeatures2::default()
            .push_next(&mut r2)
            .push_next(&mut f13);
        instance.get_physical_device_features2(pd, &mut f2);
        let robust_access = f2.features.robust_buffer_access == vk::TRUE;
        let robust2 = has(pd, robust) && r2.robust_buffer_access2 == vk::TRUE;
        let zero_native =
            api >= vk::API_VERSION_1_3 && f13.shader_zero_initialize_workgroup_memory == vk::TRUE;

        let family = instance
            .get_physical_device_queue_family_properties(pd)
            .iter()
            .position(|q| q.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .ok_or("no compute queue")? as u32;
        let priorities = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&priorities)];
        let mut extensions = Vec::new();
        if capture {
            extensions.push(want.as_ptr());
        }
        if robust2 {
            extensions.push(robust.as_ptr());
        }
        let base = vk::PhysicalDeviceFeatures::default().robust_buffer_access(robust_access);
        let mut exec_features =
            vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default()
                .pipeline_executable_info(true);
        let mut r2_on =
            vk::PhysicalDeviceRobustness2FeaturesEXT::default().robust_buffer_access2(robust2);
        let mut f13_on = vk::PhysicalDeviceVulkan13Features::default()
            .shader_zero_initialize_workgroup_memory(zero_native);
        let mut info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .enabled_extension_names(&extensions)
            .enabled_features(&base);
        if capture {
            info = info.push_next(&mut exec_features);
        }
        if robust2 {
            info = info.push_next(&mut r2_on);
        }
        if api >= vk::API_VERSION_1_3 {
            info = info.push_next(&mut f13_on);
        }
        let device = instance.create_device(pd, &info, None)?;
        let exec = capture
            .then(|| ash::khr::pipeline_executable_properties::Device::new(&instance, &device));

        // wgpu-hal 30's Vulkan options (adapter.rs), with kernel::module's runtime checks
        let mut options = spv::Options {
            lang_version: if api >= vk::API_VERSION_1_3 {
                (1, 6)
            } else if api >= vk::API_VERSION_1_2 {
                (1, 5)
            } else {
                (1, 3)
            },
            ..Default::default()
        };
        options.flags = spv::WriterFlags::FORCE_POINT_SIZE;
        options.capabilities = None;
        options.bounds_check_policies = naga::proc::BoundsCheckPolicies {
            index: naga::proc::BoundsCheckPolicy::Restrict,
            buffer: if robust2 {
                naga::proc::BoundsCheckPolicy::Unchecked
            } else {
                naga::proc::BoundsCheckPolicy::Restrict
            },
            image_load: naga::proc::BoundsCheckPolicy::Restrict,
            binding_array: naga::proc::BoundsCheckPolicy::Unchecked,
        };
        options.zero_initialize_workgroup_memory = if zero_native {
            spv::ZeroInitializeWorkgroupMemoryMode::Native
        } else {
            spv::ZeroInitializeWorkgroupMemoryMode::Polyfill
        };
        options.force_loop_bounding = false;
        options.emit_int_div_checks = true;
        Ok(Device {
            _entry: entry,
            instance,
            device,
            exec,
            name,
            options,
        })
    }
}

fn stat_value(s: &vk::PipelineExecutableStatisticKHR) -> String {
    // SAFETY: the union member read is the one `format` names.
    unsafe {
        match s.format {
            vk::PipelineExecutableStatisticFormatKHR::BOOL32 => (s.value.b32 != 0).to_string(),
            vk::PipelineExecutableStatisticFormatKHR::INT64 => s.value.i64.to_string(),
            vk::PipelineExecutableStatisticFormatKHR::UINT64 => s.value.u64.to_string(),
            vk::PipelineExecutableStatisticFormatKHR::FLOAT64 => format!("{:.3}", s.value.f64),
            _ => "?".to_string(),
        }
    }
}

/// One line per entry point of one composed module.
fn stats(dev: &Device, path: &Path) -> Res<Vec<String>> {
    let source = std::fs::read_to_string(path)?;
    let module = naga::front::wgsl::parse_str(&source).map_err(|e| e.emit_to_string(&source))?;
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .map_err(|e| e.emit_to_string(&source))?;
    let mut layouter = naga::proc::Layouter::default();
    layouter.update(module.to_ctx())?;
    let file = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let mut lines = Vec::new();
    for (index, ep) in module.entry_points.iter().enumerate() {
        if ep.stage != naga::ShaderStage::Compute {
            continue;
        }
        let used = info.get_entry_point(index);
        // one descriptor set layout per group, every resource the module declares in it
        let mut sets: Vec<Vec<vk::DescriptorSetLayoutBinding>> = Vec::new();
        let mut workgroup_bytes = 0u32;
        for (handle, var) in module.global_variables.iter() {
            if var.space == naga::AddressSpace::WorkGroup && !used[handle].is_empty() {
                workgroup_bytes += layouter[var.ty].size;
            }
            let Some(rb) = &var.binding else { continue };
            let kind = match var.space {
                naga::AddressSpace::Uniform => vk::DescriptorType::UNIFORM_BUFFER,
                naga::AddressSpace::Storage { .. } => vk::DescriptorType::STORAGE_BUFFER,
                other => return Err(format!("{file}: binding in {other:?} is not handled").into()),
            };
            let group = rb.group as usize;
            if sets.len() <= group {
                sets.resize(group + 1, Vec::new());
            }
            sets[group].push(
                vk::DescriptorSetLayoutBinding::default()
                    .binding(rb.binding)
                    .descriptor_type(kind)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE),
            );
        }
        let pipeline_options = spv::PipelineOptions {
            entry_point: ep.name.clone(),
            shader_stage: naga::ShaderStage::Compute,
        };
        let words = spv::write_vec(&module, &info, &dev.options, Some(&pipeline_options))?;
        let d = &dev.device;
        // SAFETY: objects are made, queried and destroyed here, each used only while alive.
        let line = unsafe {
            let shader =
                d.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None)?;
            let set_layouts: Vec<vk::DescriptorSetLayout> = sets
                .iter()
                .map(|b| {
                    d.create_descriptor_set_layout(
                        &vk::DescriptorSetLayoutCreateInfo::default().bindings(b),
                        None,
                    )
                })
                .collect::<Result<_, _>>()?;
            let layout = d.create_pipeline_layout(
                &vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts),
                None,
            )?;
            let entry = std::ffi::CString::new(ep.name.clone())?;
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(shader)
                .name(&entry);
            let flags = match dev.exec {
                Some(_) => vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR,
                None => vk::PipelineCreateFlags::empty(),
            };
            let create = vk::ComputePipelineCreateInfo::default()
                .flags(flags)
                .stage(stage)
                .layout(layout);
            let pipeline = d
                .create_compute_pipelines(vk::PipelineCache::null(), &[create], None)
                .map_err(|(_, e)| e)?[0];
            let mut fields = Vec::new();
            let executables = match &dev.exec {
                Some(exec) => exec
                    .get_pipeline_executable_properties(
                        &vk::PipelineInfoKHR::default().pipeline(pipeline),
                    )?
                    .len(),
                None => 0,
            };
            for i in 0..executables as u32 {
                let ex = vk::PipelineExecutableInfoKHR::default()
                    .pipeline(pipeline)
                    .executable_index(i);
                let exec = dev
                    .exec
                    .as_ref()
                    .expect("executables only with the extension");
                for s in exec.get_pipeline_executable_statistics(&ex)? {
                    let name = s
                        .name_as_c_str()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    fields.push(format!("{}={}", name.replace(' ', "_"), stat_value(&s)));
                }
            }
            d.destroy_pipeline(pipeline, None);
            d.destroy_pipeline_layout(layout, None);
            for l in set_layouts {
                d.destroy_descriptor_set_layout(l, None);
            }
            d.destroy_shader_module(shader, None);
            format!(
                "{file} {} wg={}x{}x{} workgroup_bytes={workgroup_bytes} {}",
                ep.name,
                ep.workgroup_size[0],
                ep.workgroup_size[1],
                ep.workgroup_size[2],
                fields.join(" ")
            )
        };
        lines.push(line);
    }
    Ok(lines)
}

fn main() -> Res<()> {
    let mut files: Vec<PathBuf> = Vec::new();
    for arg in std::env::args_os().skip(1) {
        let p = PathBuf::from(arg);
        if p.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(&p)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "wgsl"))
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(p);
        }
    }
    if files.is_empty() {
        return Err("usage: shader_stats DIR|FILE.wgsl ... (see GPUSORT_DUMP_WGSL)".into());
    }
    let dev = open_device()?;
    println!("# device: {}", dev.name);
    if dev.exec.is_none() {
        println!("# the driver lacks VK_KHR_pipeline_executable_properties: pipelines built, no statistics");
    }
    let mut failed = 0;
    for f in &files {
        match stats(&dev, f) {
            Ok(lines) => lines.iter().for_each(|l| println!("{l}")),
            Err(e) => {
                failed += 1;
                eprintln!("shader_stats: {}: {e}", f.display());
            }
        }
    }
    if failed > 0 {
        return Err(format!("{failed} of {} files failed", files.len()).into());
    }
    Ok(())
}
