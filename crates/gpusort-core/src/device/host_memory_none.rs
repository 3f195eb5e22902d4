//! The stand-in for `host_memory.rs` where wgpu has no Vulkan backend: no device imports host
//! memory, so the staging ring always uses wgpu's mapped buffers.

/// Never made here.
#[derive(Debug)]
pub(crate) enum HostImport {}

impl HostImport {
    pub(crate) fn open(
        _adapter: &wgpu::Adapter,
        _desc: &wgpu::DeviceDescriptor<'_>,
    ) -> Option<(wgpu::Device, wgpu::Queue, HostImport)> {
        None
    }

    pub(crate) fn of(_device: &wgpu::Device) -> Option<HostImport> {
        None
    }

    pub(crate) fn buffer(&self, _device: &wgpu::Device, _bytes: u64) -> Option<HostBuffer> {
        match *self {}
    }
}

/// Never made here.
pub(crate) enum HostBuffer {}

impl HostBuffer {
    pub(crate) fn buffer(&self) -> &wgpu::Buffer {
        match *self {}
    }

    pub(crate) fn len(&self) -> usize {
        match *self {}
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        match *self {}
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        match *self {}
    }
}
