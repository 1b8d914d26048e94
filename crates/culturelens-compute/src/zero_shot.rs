//! Zero-shot attribute classification with a CLIP-family model (Radford et al., 2021, §3.1.2;
//! MAGBIG §4, step 2): one text per class, and for an image `I`
//!
//! `p(c | I) = softmax_c(s · cos(I, T_c))`, `s = exp(logit_scale)` of the checkpoint,
//!
//! exactly transformers' `logits_per_image.softmax(-1)` (SigLIP's `logit_bias` adds the same
//! constant to every class and so drops out of the softmax). The predicted class is the argmax,
//! the first class on ties ([`culturelens_metrics::stats::argmax`]). The default texts of the `gender` attribute are those of MAGBIG's
//! released code ([`GENDER_CLASSES`]).

use burn::tensor::Tensor;
use burn::tensor::activation::softmax;

use crate::tensor::cosine_tensor;

/// The `gender` attribute's classes: the label written to the attribute column and the text
/// the image is compared with ("man, male, masculine" vs "woman, female, feminine", as MAGBIG).
pub const GENDER_CLASSES: [(&str, &str); 2] =
    [("male", "man, male, masculine"), ("female", "woman, female, feminine")];

/// `p(c | I)` for every image row of `images` (`[n, d]`) and class text row of `classes`
/// (`[k, d]`), `[n, k]`, with `scale = exp(logit_scale)`. Embeddings need not be normalised; a
/// zero row gives NaN.
pub fn class_probabilities(images: Tensor<2>, classes: Tensor<2>, scale: f32) -> Tensor<2> {
    softmax(cosine_tensor(images, classes) * scale, 1)
}

#[cfg(test)]
mod tests {
    use burn::tensor::{Device, TensorData};

    use super::*;

    #[test]
    fn probabilities_are_the_softmax_of_scaled_cosines() {
        let device = Device::flex();
        // Image 0 lies along class 0 (cos 1, 0); image 1 at 45° between both (cos √½, √½);
        // image 2 is (3, 4): cos 0.6 with class 0 and 0.8 with class 1 (scaled class rows).
        let images =
            Tensor::<2>::from_data(TensorData::new(vec![2.0f32, 0.0, 1.0, 1.0, 3.0, 4.0], [3, 2]), &device);
        let classes = Tensor::<2>::from_data(TensorData::new(vec![5.0f32, 0.0, 0.0, 0.5], [2, 2]), &device);
        let p: Vec<f32> = class_probabilities(images, classes, 10.0).into_data().try_to_vec().unwrap();
        // softmax(10, 0) = (1/(1+e^-10), e^-10/(1+e^-10)); softmax(6, 8) = (1/(1+e^2), e^2/(1+e^2)).
        let e10 = (-10f64).exp();
        let e2 = 2f64.exp();
        let want = [1.0 / (1.0 + e10), e10 / (1.0 + e10), 0.5, 0.5, 1.0 / (1.0 + e2), e2 / (1.0 + e2)];
        for (got, want) in p.iter().zip(want) {
            assert!((*got as f64 - want).abs() < 1e-6, "{p:?}");
        }
    }
}
