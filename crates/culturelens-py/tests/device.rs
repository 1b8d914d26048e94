//! `device=`/`precision=` of the wheel's `from_pretrained` on wgpu (`--features gpu`; lavapipe
//! where there is no GPU): the shared selection gives a wgpu device that computes, the same one
//! to every later call (a second `from_pretrained` in the process), and refuses what the CLI
//! refuses.

use burn::tensor::{Tensor, TensorData};

#[test]
fn wgpu_is_selected_once_and_computes() {
    let device = _native::device::select("wgpu", "f32", "embed").unwrap();
    assert!(format!("{device:?}").to_lowercase().contains("wgpu"), "{device:?}");
    let a = Tensor::<2>::from_data(TensorData::new(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2]), &device);
    let product: Vec<f32> = a.clone().matmul(a).into_data().try_to_vec().unwrap();
    assert_eq!(product, [7.0, 10.0, 15.0, 22.0]);
    assert!(culturelens_models_io::device::adapter().is_some(), "the adapter is named");
    // A second model on wgpu (Burn initialises a device once per process).
    let again = _native::device::select("wgpu", "f32", "generate").unwrap();
    assert_eq!(again, device);
    // The device computes in f32 now: another float type is refused with the CLI's message.
    let f16 = _native::device::select("wgpu", "f16", "embed").unwrap_err().to_string();
    assert!(f16.starts_with("--precision f16: "), "{f16}");
    let cpu_f16 = _native::device::select("cpu", "f16", "embed").unwrap_err().to_string();
    assert!(cpu_f16.contains("runs on a GPU"), "{cpu_f16}");
    let other = _native::device::select("cuda", "f32", "embed").unwrap_err().to_string();
    assert!(other.contains("expected \"cpu\" or \"wgpu\""), "{other}");
}
