//! The same SoS code on the CPU (`flex`) and wgpu backends must give the same numbers (≤ 1e-5).
//! Without a GPU, wgpu runs on a software Vulkan driver (Debian `mesa-vulkan-drivers`, lavapipe);
//! this test fails rather than skips when no adapter exists, unless CULTURELENS_SKIP_WGPU=1.

use std::sync::OnceLock;

use burn::tensor::Device;
use culturelens_core::demo::demo_table;
use culturelens_core::sos::{Pooling, SosColumns, sos};

fn wgpu() -> Option<&'static Device> {
    static DEVICE: OnceLock<Option<Device>> = OnceLock::new();
    DEVICE
        .get_or_init(|| match Device::wgpu_options().init() {
            Ok(d) => Some(d),
            Err(e) if std::env::var("CULTURELENS_SKIP_WGPU").as_deref() == Ok("1") => {
                eprintln!("skipping wgpu (CULTURELENS_SKIP_WGPU=1): {e}");
                None
            }
            Err(e) => {
                panic!("no wgpu adapter ({e}); install mesa-vulkan-drivers or set CULTURELENS_SKIP_WGPU=1")
            }
        })
        .as_ref()
}

#[test]
fn cpu_and_wgpu_agree_on_the_demo_table() {
    let Some(gpu) = wgpu() else { return };
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
        let max_diff = cpu_values
            .per_image
            .iter()
            .zip(&gpu_values.per_image)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(max_diff <= 1e-5, "{pooling:?}: per-image max |cpu - wgpu| = {max_diff}");
        for (a, b) in cpu_report.joint.iter().zip(&gpu_report.joint) {
            assert_eq!((&a.model, &a.language, &a.culture, a.n), (&b.model, &b.language, &b.culture, b.n));
            assert!((a.sos - b.sos).abs() <= 1e-5, "{a:?} vs {b:?}");
        }
    }
}
