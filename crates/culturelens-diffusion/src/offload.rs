//! Component residency (`generate --offload`): where a pipeline's models wait between uses.
//!
//! Without offloading every component is loaded onto the compute device and stays there. With
//! it, `culturelens-models-io` loads each component onto the compute device and at once parks it
//! on the host ([`Component::to_device`], one component on the device at a time even while
//! loading), and the pipelines take each component through [`on_device`] where they use it: the
//! text encoders one after the other, then the denoiser for the whole loop, then the VAE/MoVQ. A
//! parked component is copied to the device for that phase and its copy dropped after it (the
//! device's memory pool is then asked to release its pages), so at most one component's weights
//! are on the device at a time. A component already on the device is lent as it is.
//!
//! The weights are moved, never recomputed: the host copy holds the very values (and float
//! types, e.g. SDXL's upcast VAE) the device produced when it loaded them, and Burn's transfer
//! between backends copies a tensor's bytes, so a run gives the same images with and without
//! offloading.

use std::ops::Deref;

use burn::module::Module;
use burn::tensor::Device;

/// A pipeline component that can move between devices: every Burn [`Module`], and enums over
/// them such as the pipelines' `TextEncoder`.
pub trait Component: Clone {
    /// The component with every tensor on `device` (their float types kept).
    fn to_device(self, device: &Device) -> Self;
    /// Whether every tensor of the component is on `device`.
    fn is_on(&self, device: &Device) -> bool;
}

impl<M: Module> Component for M {
    fn to_device(self, device: &Device) -> Self {
        Module::to_device(self, device)
    }

    fn is_on(&self, device: &Device) -> bool {
        self.devices().iter().all(|d| d == device)
    }
}

/// A component on the compute device for one phase of a run: lent where it already is, or a copy
/// of a parked component, dropped (and the device's memory pool cleaned) with this value.
#[derive(Debug)]
pub enum OnDevice<'a, M: Component> {
    Resident(&'a M),
    Copy { module: Option<M>, device: Device },
}

/// `module` on `device` for one phase: itself when it is there, else a copy moved there.
pub fn on_device<'a, M: Component>(module: &'a M, device: &Device) -> OnDevice<'a, M> {
    if module.is_on(device) {
        OnDevice::Resident(module)
    } else {
        OnDevice::Copy { module: Some(module.clone().to_device(device)), device: device.clone() }
    }
}

impl<M: Component> Deref for OnDevice<'_, M> {
    type Target = M;

    fn deref(&self) -> &M {
        match self {
            Self::Resident(m) => m,
            Self::Copy { module, .. } => module.as_ref().expect("a component copy lives until dropped"),
        }
    }
}

impl<M: Component> Drop for OnDevice<'_, M> {
    fn drop(&mut self) {
        if let Self::Copy { module, device } = self {
            drop(module.take());
            device.memory_cleanup();
        }
    }
}

#[cfg(test)]
mod tests {
    use burn::module::Param;
    use burn::tensor::{Tensor, TensorData};

    use super::*;

    #[derive(Module, Debug)]
    struct Two {
        a: Param<Tensor<1>>,
        b: Param<Tensor<2>>,
    }

    #[test]
    fn a_module_already_on_the_device_is_lent_not_copied() {
        let device = Device::flex();
        let two = Two {
            a: Param::from_tensor(Tensor::from_data(TensorData::new(vec![1.5f32, -2.0], [2]), &device)),
            b: Param::from_tensor(Tensor::from_data(TensorData::new(vec![0.25f32; 6], [2, 3]), &device)),
        };
        assert!(two.is_on(&device));
        let lent = on_device(&two, &device);
        assert!(matches!(lent, OnDevice::Resident(_)));
        assert_eq!(lent.a.val().into_data(), two.a.val().into_data());
    }
}
