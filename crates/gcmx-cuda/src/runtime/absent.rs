//! The runtime without the `cuda` feature: no driver is linked, [`Gpu::get`] reports
//! `Error::BackendUnavailable`, and since no [`Gpu`] can exist, nothing else can be reached. The
//! signatures are the driver's, so the layers above compile unchanged.

use std::sync::{Arc, Mutex};

use gcmx_core::Error;

use super::{At, DbArgs, DeviceInfo, Launch, Span, Stream};

/// No value of this type exists.
#[derive(Clone, Copy, Debug)]
enum Never {}

/// A device (none exist in this build).
#[derive(Debug)]
pub(crate) struct Gpu {
    never: Never,
}

impl Gpu {
    /// Always `Error::BackendUnavailable`: this build has no CUDA backend.
    pub(crate) fn get(_ordinal: u32) -> Result<Arc<Gpu>, Error> {
        Err(Error::BackendUnavailable(
            "this build of gcmx-cuda has no CUDA backend (its `cuda` feature, which gcmx's `cuda` feature turns on, is off)"
                .into(),
        ))
    }

    pub(crate) fn info(&self) -> &DeviceInfo {
        match self.never {}
    }

    /// Always `Error::BackendUnavailable`.
    pub(crate) fn count() -> Result<u32, Error> {
        Gpu::get(0).map(|_| 0)
    }

    pub(crate) fn take_slot(self: &Arc<Self>, _len: usize) -> Result<ParamSlot, Error> {
        match self.never {}
    }

    pub(crate) fn give_slot(&self, _slot: ParamSlot) {
        match self.never {}
    }

    pub(crate) fn take_scratch(self: &Arc<Self>, _len: usize) -> Result<Scratch, Error> {
        match self.never {}
    }

    pub(crate) fn give_scratch(&self, _s: Scratch) {
        match self.never {}
    }

    pub(crate) fn resident_blocks(&self, _name: &'static str, _block: u32) -> Result<u32, Error> {
        match self.never {}
    }

    pub(crate) fn state<T: Default + Send + 'static>(&self) -> Arc<Mutex<T>> {
        match self.never {}
    }

    pub(crate) fn with_lane<R>(
        self: &Arc<Self>,
        _f: impl FnOnce(&mut Lane) -> Result<R, Error>,
    ) -> Result<R, Error> {
        match self.never {}
    }
}

/// Device memory (none exists in this build).
#[derive(Debug)]
pub(crate) struct DeviceMem {
    never: Never,
}

impl DeviceMem {
    pub(crate) fn new(gpu: &Arc<Gpu>, _len: usize) -> Result<Arc<DeviceMem>, Error> {
        match gpu.never {}
    }

    pub(crate) fn zeroed(gpu: &Arc<Gpu>, _len: usize) -> Result<Arc<DeviceMem>, Error> {
        match gpu.never {}
    }

    pub(crate) fn len(&self) -> usize {
        match self.never {}
    }

    pub(crate) fn gpu(&self) -> &Arc<Gpu> {
        match self.never {}
    }

    pub(crate) fn upload(self: &Arc<Self>, _off: usize, _src: &[u8]) -> Result<(), Error> {
        match self.never {}
    }

    pub(crate) fn download(self: &Arc<Self>, _off: usize, _dst: &mut [u8]) -> Result<(), Error> {
        match self.never {}
    }

    pub(crate) fn zero(self: &Arc<Self>) -> Result<(), Error> {
        match self.never {}
    }
}

/// A stream (none exists in this build).
#[derive(Debug)]
pub(crate) struct Lane {
    never: Never,
}

impl Lane {
    pub(crate) fn new(gpu: &Arc<Gpu>) -> Result<Lane, Error> {
        match gpu.never {}
    }

    pub(crate) fn wait(&mut self) -> Result<(), Error> {
        match self.never {}
    }

    pub(crate) fn set_sleepy(&mut self, _sleepy: bool) {
        match self.never {}
    }

    pub(crate) fn launch_dbatch(&mut self, a: DbArgs<'_>) -> Result<(), Error> {
        a.check()?;
        match self.never {}
    }

    pub(crate) fn reserve_host(&mut self, _i: usize, _len: usize) -> Result<(), Error> {
        match self.never {}
    }

    pub(crate) fn host(&mut self, _i: usize) -> Result<&mut [u8], Error> {
        match self.never {}
    }

    pub(crate) fn upload(
        &mut self,
        _i: usize,
        _host_off: usize,
        _dst: At<'_>,
        _n: usize,
    ) -> Result<(), Error> {
        match self.never {}
    }

    pub(crate) fn download(
        &mut self,
        _src: At<'_>,
        _i: usize,
        _host_off: usize,
        _n: usize,
    ) -> Result<(), Error> {
        match self.never {}
    }

    pub(crate) fn memset(&mut self, _dst: At<'_>, _n: usize) -> Result<(), Error> {
        match self.never {}
    }

    /// Checks the launch as the driver would, though no lane exists to run it.
    pub(crate) fn launch(&mut self, l: Launch<'_>) -> Result<(), Error> {
        l.check()?;
        match self.never {}
    }
}

/// Transfers of caller memory (none happen in this build).
#[derive(Debug)]
pub(crate) struct DirectIo<'a> {
    never: Never,
    _lanes: core::marker::PhantomData<&'a mut [Lane]>,
}

impl DirectIo<'_> {
    pub(crate) fn lane(&mut self, _i: usize) -> Result<&mut Lane, Error> {
        match self.never {}
    }

    pub(crate) fn upload(
        &mut self,
        _i: usize,
        _host_off: usize,
        _dst: At<'_>,
        _n: usize,
    ) -> Result<(), Error> {
        match self.never {}
    }

    pub(crate) fn download(
        &mut self,
        _i: usize,
        _src: At<'_>,
        _host_off: usize,
        _n: usize,
    ) -> Result<(), Error> {
        match self.never {}
    }

    pub(crate) fn upload_span(
        &mut self,
        _i: usize,
        _span: usize,
        _off: usize,
        _dst: At<'_>,
        _n: usize,
    ) -> Result<(), Error> {
        match self.never {}
    }

    pub(crate) fn download_span(
        &mut self,
        _i: usize,
        _span: usize,
        _src: At<'_>,
        _off: usize,
        _n: usize,
    ) -> Result<(), Error> {
        match self.never {}
    }
}

pub(crate) fn direct_io<R>(
    gpu: &Arc<Gpu>,
    _lanes: &mut [Lane],
    _host: &mut [u8],
    _f: impl FnOnce(&mut DirectIo<'_>) -> Result<R, Error>,
) -> Option<Result<R, Error>> {
    match gpu.never {}
}

pub(crate) fn pin_scope<R>(
    gpu: &Arc<Gpu>,
    _buf: &mut [u8],
    _f: impl FnOnce(&mut [u8]) -> R,
) -> Result<R, Error> {
    match gpu.never {}
}

/// # Safety
/// As the driver build's `direct_io_spans` (never callable here: no `Gpu` exists).
pub(crate) unsafe fn direct_io_spans<R>(
    gpu: &Arc<Gpu>,
    _lanes: &mut [Lane],
    _spans: &[Span],
    _f: impl FnOnce(&mut DirectIo<'_>) -> Result<R, Error>,
) -> Option<Result<R, Error>> {
    match gpu.never {}
}

/// A fence (none exists in this build).
#[derive(Debug)]
pub(crate) struct Fence {
    never: Never,
}

impl Fence {
    pub(crate) fn done(&self) -> Result<bool, Error> {
        match self.never {}
    }

    pub(crate) fn wait(&self) -> Result<(), Error> {
        match self.never {}
    }
}

/// A caller's stream (none exists in this build).
#[derive(Debug)]
pub(crate) struct UserStream {
    never: Never,
}

impl Stream {
    /// Always `Error::BackendUnavailable` in this build.
    pub fn on_device(ordinal: u32) -> Result<Stream, Error> {
        let gpu = Gpu::get(ordinal)?;
        match gpu.never {}
    }

    /// Always `Error::BackendUnavailable` in this build.
    ///
    /// # Safety
    ///
    /// As with the `cuda` feature: `raw` is a stream of the primary context of device `ordinal`, valid
    /// while the returned `Stream` lives and its work runs.
    pub unsafe fn from_raw(ordinal: u32, _raw: *mut std::ffi::c_void) -> Result<Stream, Error> {
        let gpu = Gpu::get(ordinal)?;
        match gpu.never {}
    }

    /// The raw handle (no value of this type exists in this build).
    pub fn as_raw(&self) -> *mut std::ffi::c_void {
        match self.inner.never {}
    }

    /// Wait for the stream's work (no value of this type exists in this build).
    pub fn synchronize(&self) -> Result<(), Error> {
        match self.inner.never {}
    }

    /// The device ordinal (no value of this type exists in this build).
    pub fn device(&self) -> u32 {
        match self.inner.never {}
    }

    pub(crate) fn gpu(&self) -> &Arc<Gpu> {
        match self.inner.never {}
    }
}

/// A parameter slot (none exists in this build).
#[derive(Debug)]
pub(crate) struct ParamSlot {
    never: Never,
}

impl ParamSlot {
    pub(crate) fn bytes(&mut self) -> Result<&mut [u8], Error> {
        match self.never {}
    }
}

/// A device-batch scratch (none exists in this build).
#[derive(Debug)]
pub(crate) struct Scratch {
    never: Never,
}

impl Scratch {
    pub(crate) fn len(&self) -> usize {
        match self.never {}
    }
}

pub(crate) fn queue_dbatch(
    stream: &Stream,
    _args: DbArgs<'_>,
    _slot: Option<&ParamSlot>,
) -> Result<Arc<Fence>, Error> {
    match stream.inner.never {}
}
