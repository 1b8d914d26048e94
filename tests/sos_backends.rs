//! The same SoS code on the CPU (`flex`) and wgpu backends must give the same numbers: within
//! [`BOUND`], about 2.5× the largest difference measured on lavapipe (3.9e-7).
//! Without a GPU, wgpu runs on a software Vulkan driver (Debian `mesa-vulkan-drivers`, lavapipe);
//! the test fails, never skips, when no adapter exists.

use burn::tensor::Device;
use culturelens_core::demo::demo_table;
use culturelens_core::sos::{Pooling, SosColumns, sos};

/// Largest |cpu − wgpu| of a per-image or joint score.
const BOUND: f64 = 1e-6;

#[test]
fn cpu_and_wgpu_agree_on_the_demo_table() {
    cpu_and_device_agree(&crate::common::wgpu(), "wgpu");
}

/// The same on wgpu pinned to Vulkan, its kernels compiled to SPIR-V (`--features vulkan`).
#[cfg(feature = "vulkan")]
#[test]
fn cpu_and_vulkan_agree_on_the_demo_table() {
    let vulkan =
        Device::wgpu_options().graphics_api(burn::tensor::wgpu::WgpuBackend::Vulkan).init().unwrap_or_else(
            |e| panic!("no Vulkan adapter ({e}); install a Vulkan driver, e.g. mesa-vulkan-drivers"),
        );
    cpu_and_device_agree(&vulkan, "vulkan");
}

/// Per-image and joint scores of both poolings on the CPU and on `gpu`, within [`BOUND`].
fn cpu_and_device_agree(gpu: &Device, name: &str) {
    let demo = demo_table();
    let cols = SosColumns {
        model: demo.column("model").unwrap(),
        language: demo.column("language").unwrap(),
        culture: demo.column("culture").unwrap(),
        layer: None,
        person: demo.column("person"),
    };
    for pooling in [Pooling::All, Pooling::PerModel] {
        // CPU in cache-sized row blocks, the GPU in one block: same numbers.
        let cpu = sos(demo.embeddings.clone(), demo.dim, cols, pooling, &Device::flex(), Some(100));
        let (_, cpu_values, cpu_report) = cpu.unwrap();
        let (_, gpu_values, gpu_report) =
            sos(demo.embeddings.clone(), demo.dim, cols, pooling, gpu, None).unwrap();
        assert_eq!(cpu_values.per_image.len(), demo.len());
        assert_eq!(gpu_values.per_image.len(), demo.len());
        let max_diff = cpu_values
            .per_image
            .iter()
            .zip(&gpu_values.per_image)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert_eq!(cpu_report.joint.len(), gpu_report.joint.len());
        let mut max_joint = 0.0f64;
        for (a, b) in cpu_report.joint.iter().zip(&gpu_report.joint) {
            assert_eq!((&a.model, &a.language, &a.culture, a.n), (&b.model, &b.language, &b.culture, b.n));
            max_joint = max_joint.max((a.sos - b.sos).abs());
        }
        println!(
            "{pooling:?}: max |cpu - {name}| per image = {max_diff:.3e}, joint = {max_joint:.3e} (bound {BOUND:.0e})"
        );
        assert!(f64::from(max_diff) <= BOUND, "{pooling:?}: per-image max |cpu - {name}| = {max_diff}");
        assert!(max_joint <= BOUND, "{pooling:?}: joint max |cpu - {name}| = {max_joint}");
    }
}
