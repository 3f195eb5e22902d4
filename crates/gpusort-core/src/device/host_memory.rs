//! Host memory the GPU's copy engine reads and writes directly: Vulkan's
//! `VK_EXT_external_memory_host`, reached through wgpu-hal and `ash`. This is gpusort's one
//! native escape; everything else stays on wgpu's portable API.
//!
//! What it gives: staging buffers that are ordinary cached, page-aligned host allocations
//! imported as device memory, instead of wgpu's mapped staging memory (uncached or
//! write-combined for the CPU on discrete GPUs). The CPU fills and drains them at memory speed
//! and the GPU copies them over the link, with no map/unmap round trips. Where the backend is
//! not Vulkan, the driver lacks the extension, no host-coherent memory type accepts the import,
//! or any step fails, [`HostImport::open`] / [`HostImport::buffer`] return `None` and the
//! caller keeps wgpu's mapped staging ring (the fallback, always correct).
//!
//! # Safety argument
//!
//! 1. The device is created by wgpu-hal's own `open_with_callback`, which only lets us *add* an
//!    extension the physical device reports; wgpu then wraps it (`create_device_from_hal`) and
//!    manages it exactly as one it created itself.
//! 2. Each [`HostBuffer`] owns a host allocation (`std::alloc`, aligned to the driver's
//!    `minImportedHostPointerAlignment` and to the page — to 2 MiB from 8 MiB, advised to be huge
//!    pages, which the driver pins far faster — size a multiple of it, zeroed before import), a
//!    `VkDeviceMemory` importing exactly that range, and a `VkBuffer` bound to it. The VkBuffer
//!    is handed to wgpu as an *externally owned* buffer whose drop callback destroys the
//!    VkBuffer, frees the VkDeviceMemory and only then frees the host allocation. wgpu runs that
//!    callback when its last reference goes — after every submission that used the buffer has
//!    completed — so the host pages outlive every GPU access and the import (as the extension
//!    requires).
//! 3. The CPU touches the host range only through [`HostBuffer::bytes`]/[`HostBuffer::bytes_mut`],
//!    which callers (the staging ring in `transfer.rs`) use only after waiting for the submission
//!    that last used the buffer — the same discipline as wgpu's map/unmap, which it replaces.
//!    The memory type is host-coherent, so no flush or invalidate is needed either way.
//! 4. wgpu marks buffers created from hal as initialised, so it never clears the range behind
//!    our writes; the buffer is only ever a copy source or destination (no binding, no map).

use std::alloc::Layout;
use std::ffi::c_void;
use std::ptr::NonNull;

use ash::vk;
use wgpu::hal::api::Vulkan;

/// The device's ability to import host memory (present when the device was opened with the
/// extension).
pub(crate) struct HostImport {
    device: ash::Device,
    host_pointer_properties: vk::PFN_vkGetMemoryHostPointerPropertiesEXT,
    memory: vk::PhysicalDeviceMemoryProperties,
    /// `minImportedHostPointerAlignment`, at least the page size.
    alignment: usize,
}

impl std::fmt::Debug for HostImport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostImport")
            .field("alignment", &self.alignment)
            .finish_non_exhaustive()
    }
}

/// The smallest page of the platforms gpusort runs on; the driver's own alignment is larger
/// where its pages are.
const MIN_PAGE: usize = 4096;

/// The huge page of x86-64 and arm64 Linux, and the size from which staging buffers take them.
const HUGE_PAGE: usize = 2 << 20;
const HUGE_FROM: usize = 8 << 20;

impl HostImport {
    /// Open a device on `adapter` with the extension enabled, where it is Vulkan and offers it.
    /// None: use `adapter.request_device` as usual.
    pub(crate) fn open(
        adapter: &wgpu::Adapter,
        desc: &wgpu::DeviceDescriptor<'_>,
    ) -> Option<(wgpu::Device, wgpu::Queue, HostImport)> {
        let name = ash::ext::external_memory_host::NAME;
        let open = {
            // SAFETY: the guard is only read here, and dropped before the device is wrapped
            let hal = unsafe { adapter.as_hal::<Vulkan>() }?;
            if !hal.physical_device_capabilities().supports_extension(name) {
                return None;
            }
            let add: Box<wgpu::hal::vulkan::CreateDeviceCallback<'_>> = Box::new(|args| {
                if !args.extensions.contains(&name) {
                    args.extensions.push(name);
                }
            });
            // SAFETY: the callback only adds an extension the physical device supports
            unsafe {
                hal.open_with_callback(
                    desc.required_features,
                    &desc.required_limits,
                    &desc.memory_hints,
                    Some(add),
                )
            }
            .ok()?
        };
        // SAFETY: `open` was created from this adapter's hal adapter with the descriptor's
        // features
        let (device, queue) =
            unsafe { adapter.create_device_from_hal::<Vulkan>(open, desc) }.ok()?;
        let import = HostImport::of(&device)?;
        Some((device, queue, import))
    }

    /// The import facts of a Vulkan device that was opened with the extension (a caller's own
    /// device too); None otherwise.
    pub(crate) fn of(device: &wgpu::Device) -> Option<HostImport> {
        let name = ash::ext::external_memory_host::NAME;
        // SAFETY: only read; the raw handles are used while `device` lives (the Gpu owns both)
        let hal = unsafe { device.as_hal::<Vulkan>() }?;
        if !hal.enabled_device_extensions().contains(&name) {
            return None;
        }
        let instance = hal.shared_instance().raw_instance();
        let phd = hal.raw_physical_device();
        let mut host = vk::PhysicalDeviceExternalMemoryHostPropertiesEXT::default();
        let mut props = vk::PhysicalDeviceProperties2::default().push_next(&mut host);
        // SAFETY: valid instance and physical device; the chain holds one known struct
        unsafe { instance.get_physical_device_properties2(phd, &mut props) };
        let alignment = (host.min_imported_host_pointer_alignment as usize).max(MIN_PAGE);
        if !alignment.is_power_of_two() {
            return None;
        }
        // SAFETY: as above
        let memory = unsafe { instance.get_physical_device_memory_properties(phd) };
        let raw = hal.raw_device().clone();
        let fns = ash::ext::external_memory_host::Device::new(instance, &raw);
        Some(HostImport {
            device: raw,
            host_pointer_properties: fns.fp().get_memory_host_pointer_properties_ext,
            memory,
            alignment,
        })
    }

    /// A staging buffer of at least `bytes` in imported host memory, usable as a copy source and
    /// destination. None where any step fails (the caller falls back to mapped staging).
    pub(crate) fn buffer(&self, device: &wgpu::Device, bytes: u64) -> Option<HostBuffer> {
        // large buffers on huge-page boundaries, advised to be huge pages: the driver pins the
        // pages when it imports them, and pinning 2 MiB pages is far cheaper than 4 KiB ones
        let align = if bytes >= HUGE_FROM as u64 {
            self.alignment.max(HUGE_PAGE)
        } else {
            self.alignment
        };
        let size = (bytes.max(4) as usize).checked_next_multiple_of(align)?;
        let layout = Layout::from_size_align(size, align).ok()?;
        // SAFETY: non-zero size
        let ptr = NonNull::new(unsafe { std::alloc::alloc(layout) })?;
        // advised before the first touch (the zeroing), which is when pages are chosen
        crate::device::pages::advise_huge_range(ptr.as_ptr(), size);
        // SAFETY: `size` bytes at `ptr` are this fresh allocation's
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, size) };
        let host = HostAlloc { ptr, layout };
        let d = &self.device;
        let handle = vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT;
        let mut pointer_props = vk::MemoryHostPointerPropertiesEXT::default();
        // SAFETY: a valid device and a live, suitably aligned host pointer
        let r = unsafe {
            (self.host_pointer_properties)(
                d.handle(),
                handle,
                ptr.as_ptr() as *const c_void,
                &mut pointer_props,
            )
        };
        if r != vk::Result::SUCCESS {
            return None;
        }
        let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(handle);
        let info = vk::BufferCreateInfo::default()
            .size(size as u64)
            .usage(vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST)
            .sharing_mode(vk::SharingMode::EXCLUSIVE)
            .push_next(&mut external);
        // SAFETY: valid create info
        let buffer = unsafe { d.create_buffer(&info, None) }.ok()?;
        // SAFETY: `buffer` was just created on `d`
        let needs = unsafe { d.get_buffer_memory_requirements(buffer) };
        let coherent =
            vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let allowed = needs.memory_type_bits & pointer_props.memory_type_bits;
        let Some(type_index) = (0..self.memory.memory_type_count).find(|&i| {
            allowed & (1 << i) != 0
                && self.memory.memory_types[i as usize]
                    .property_flags
                    .contains(coherent)
        }) else {
            // SAFETY: unused buffer of this device
            unsafe { d.destroy_buffer(buffer, None) };
            return None;
        };
        let mut import = vk::ImportMemoryHostPointerInfoEXT::default()
            .handle_type(handle)
            .host_pointer(ptr.as_ptr() as *mut c_void);
        let alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(size as u64)
            .memory_type_index(type_index)
            .push_next(&mut import);
        // SAFETY: the host range is live, aligned and sized as the extension requires
        let memory = match unsafe { d.allocate_memory(&alloc, None) } {
            Ok(m) => m,
            Err(_) => {
                // SAFETY: unused buffer of this device
                unsafe { d.destroy_buffer(buffer, None) };
                return None;
            }
        };
        // SAFETY: fresh buffer and memory of the same device, size within the allocation
        if unsafe { d.bind_buffer_memory(buffer, memory, 0) }.is_err() {
            // SAFETY: neither is in use
            unsafe {
                d.destroy_buffer(buffer, None);
                d.free_memory(memory, None);
            }
            return None;
        }
        let release_device = d.clone();
        let bytes_at = host.ptr;
        let release: wgpu::hal::DropCallback = Box::new(move || {
            // SAFETY: wgpu calls this once, after its last use of the buffer (point 2 above):
            // the buffer, then the import, then the host pages
            unsafe {
                release_device.destroy_buffer(buffer, None);
                release_device.free_memory(memory, None);
            }
            drop(host);
        });
        // SAFETY: the VkBuffer is ours, bound, not mappable by wgpu; its memory and host pages
        // are released by `release` only
        let hal_buffer =
            unsafe { wgpu::hal::vulkan::Buffer::from_raw_externally_owned(buffer, release) };
        let desc = wgpu::BufferDescriptor {
            label: Some("imported host staging"),
            size: size as u64,
            usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        };
        // SAFETY: created on this device's raw device, matching `desc`, fully initialised
        let wgpu_buffer = unsafe { device.create_buffer_from_hal::<Vulkan>(hal_buffer, &desc) };
        Some(HostBuffer {
            buffer: wgpu_buffer,
            ptr: bytes_at,
            len: size,
        })
    }
}

/// A page-aligned host allocation, freed on drop.
struct HostAlloc {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: plain memory with one owner
unsafe impl Send for HostAlloc {}
// SAFETY: as above; no interior access through a shared reference
unsafe impl Sync for HostAlloc {}

impl Drop for HostAlloc {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in `HostImport::buffer`
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// A staging buffer in imported host memory: the GPU copies into and out of `buffer`, the CPU
/// reads and writes the same bytes through [`HostBuffer::bytes`]/[`HostBuffer::bytes_mut`].
pub(crate) struct HostBuffer {
    buffer: wgpu::Buffer,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the bytes are only reached through &self/&mut self, under the ring's wait discipline
unsafe impl Send for HostBuffer {}
// SAFETY: as above
unsafe impl Sync for HostBuffer {}

impl HostBuffer {
    pub(crate) fn buffer(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The host bytes. The caller has waited for every submission that writes the buffer.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: live for as long as `self.buffer` (point 2); no GPU write in flight (point 3)
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The host bytes, for filling. The caller has waited for every submission that reads them.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `bytes`, and `&mut self` makes this the only view
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}
