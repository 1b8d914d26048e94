//! A pipeline folder's size rule read from its configs alone (`PipelineFolder::size_rule`, what
//! `generate` checks before any weights load) is the rule its loaded pipeline checks requests
//! with: on every committed tiny pipeline, the same default size, the same verdict and message
//! for every height and width up to 80 pixels, and the same image size (Kandinsky 3's rounding).

use burn::tensor::Device;
use culturelens_models_io::diffusion::PipelineFolder;
use culturelens_testkit::fixture;

const PIPELINES: &[&str] = &[
    "tiny-sd1",
    "tiny-sd2",
    "tiny-alt",
    "tiny-sdxl",
    "tiny-playground",
    "tiny-sd3",
    "tiny-sd35",
    "tiny-flux-dev",
    "tiny-flux-schnell",
    "tiny-cogview4",
    "tiny-lumina2",
    "tiny-kandinsky3",
    "tiny-if",
];

#[test]
fn the_config_rule_is_the_loaded_pipelines_rule() {
    let device = Device::flex();
    for name in PIPELINES {
        let dir = fixture("diffusion").join(name);
        let rule = PipelineFolder::size_rule(&dir).unwrap();
        let model = PipelineFolder::load(&dir, &device, None).unwrap().model;
        assert_eq!(rule.default, model.default_size(), "{name}: default size");
        let (mut taken, mut refused) = (0, 0);
        for width in [16, rule.default] {
            for height in 0..=80 {
                let from_configs = rule.check(height, width).map_err(|e| e.to_string());
                let loaded = model.latent_shape(1, height, width).map(|_| ()).map_err(|e| e.to_string());
                assert_eq!(from_configs, loaded, "{name}: {height}×{width}");
                if loaded.is_ok() {
                    assert_eq!(rule.image_size(height, width), model.image_size(height, width), "{name}");
                    taken += 1;
                } else {
                    refused += 1;
                }
            }
        }
        eprintln!("{name}: default {}, {taken} sizes taken, {refused} refused, as loaded", rule.default);
        assert!(refused > 0 && taken > 0, "{name}: the sizes tried must include both kinds");
    }
}
