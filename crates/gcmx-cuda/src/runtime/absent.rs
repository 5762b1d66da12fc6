//! The runtime without the `cuda` feature: no driver is linked, [`Gpu::get`] reports
//! `Error::BackendUnavailable`, and since no [`Gpu`] can exist, nothing else can be reached. The
//! signatures are the driver's, so the layers above compile unchanged.

use std::sync::{Arc, Mutex};

use gcmx_core::Error;

use super::{At, DeviceInfo, Launch};

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
