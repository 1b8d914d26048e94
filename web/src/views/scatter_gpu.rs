//! The scatter's WebGPU point renderer: every point is one instance of a square sprite drawn by
//! `shaders/scatter.wgsl`, so a frame is one draw call whatever the number of points (150k at
//! SoS-paper scale). Used when the compute backend is WebGPU; with the CPU backend the scatter
//! rasterises on the CPU instead (`scatter.rs`).
//!
//! It renders with the wgpu device behind Burn's WebGPU backend (`compute::GpuHandles`), into an
//! offscreen RGBA8 texture that is copied back (one asynchronous buffer map, 1.8 MB for 820 × 560)
//! and shown with `putImageData`. Not onto a WebGPU canvas context: with Chromium's SwiftShader
//! adapter, presenting any WebGPU canvas destroys every GPU device of the page — Burn's too —
//! (reproduced with plain JavaScript), and the offscreen path is the one that can be tested here.

use std::cell::RefCell;
use std::rc::Rc;

use wasm_bindgen_futures::JsFuture;

use crate::compute::GpuHandles;

const SHADER: &str = include_str!("../../../shaders/scatter.wgsl");
/// Bytes per instance: x, y (f32) and RGBA8 (alpha 255 = selected).
pub const INSTANCE_BYTES: usize = 12;

/// What the shader needs to place the points (the `View` uniform of `scatter.wgsl`).
#[derive(Debug, Clone, Copy)]
pub struct ViewUniform {
    pub centre: [f32; 2],
    pub scale: f32,
    pub canvas: [f32; 2],
    /// Side of an unselected and of a selected point, pixels.
    pub point: [f32; 2],
}

impl ViewUniform {
    fn bytes(&self) -> Vec<u8> {
        [
            self.centre[0],
            self.centre[1],
            self.scale,
            0.0,
            self.canvas[0],
            self.canvas[1],
            self.point[0],
            self.point[1],
        ]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect()
    }
}

/// Appends one point to an instance buffer.
pub fn push_instance(buf: &mut Vec<u8>, x: f32, y: f32, rgb: [u8; 3], selected: bool) {
    buf.extend_from_slice(&x.to_le_bytes());
    buf.extend_from_slice(&y.to_le_bytes());
    buf.extend_from_slice(&[rgb[0], rgb[1], rgb[2], if selected { 255 } else { 0 }]);
}

struct Renderer {
    device: wgpu::Device,
    queue: wgpu::Queue,
    layout: wgpu::BindGroupLayout,
    uniform: wgpu::Buffer,
    pipeline: wgpu::RenderPipeline,
    /// The offscreen colour target, for the size it was made for.
    target: RefCell<Option<((u32, u32), wgpu::Texture)>>,
    /// The instance buffer (grown as needed).
    points: RefCell<Option<wgpu::Buffer>>,
}

/// Pixel format of the offscreen target: the bytes `putImageData` takes.
const FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Rgba8Unorm;

thread_local! {
    /// The renderer, built on first use; `Err` once building or drawing failed.
    static RENDERER: RefCell<Option<Result<Rc<Renderer>, String>>> = const { RefCell::new(None) };
}

/// Renders the instances in `instances` (see [`push_instance`]) at `width × height` with Burn's
/// wgpu handles and returns the RGBA pixels, row-major. An `Err` is remembered, and the caller
/// rasterises on the CPU from then on.
pub async fn render(
    instances: &[u8],
    view: ViewUniform,
    width: u32,
    height: u32,
    gpu: &GpuHandles,
) -> Result<Vec<u8>, String> {
    let renderer = RENDERER
        .with(|r| r.borrow_mut().get_or_insert_with(|| Ok(Rc::new(Renderer::new(gpu.clone())))).clone())?;
    let pixels = renderer.frame(instances, view, width, height).await;
    if let Err(e) = &pixels {
        RENDERER.with(|r| *r.borrow_mut() = Some(Err(e.clone())));
    }
    pixels
}

impl Renderer {
    fn new(gpu: GpuHandles) -> Renderer {
        let GpuHandles { device, queue } = gpu;
        let shader = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("scatter.wgsl"),
            source: wgpu::ShaderSource::Wgsl(SHADER.into()),
        });
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("scatter view"),
            entries: &[wgpu::BindGroupLayoutEntry {
                binding: 0,
                visibility: wgpu::ShaderStages::VERTEX,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            }],
        });
        let uniform = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("scatter view"),
            size: 32,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("scatter"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let attributes = wgpu::vertex_attr_array![0 => Float32x2, 1 => Unorm8x4];
        let pipeline = device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
            label: Some("scatter"),
            layout: Some(&pipeline_layout),
            vertex: wgpu::VertexState {
                module: &shader,
                entry_point: Some("vs_main"),
                compilation_options: Default::default(),
                buffers: &[Some(wgpu::VertexBufferLayout {
                    array_stride: INSTANCE_BYTES as u64,
                    step_mode: wgpu::VertexStepMode::Instance,
                    attributes: &attributes,
                })],
            },
            primitive: wgpu::PrimitiveState::default(),
            depth_stencil: None,
            multisample: wgpu::MultisampleState::default(),
            fragment: Some(wgpu::FragmentState {
                module: &shader,
                entry_point: Some("fs_main"),
                compilation_options: Default::default(),
                targets: &[Some(wgpu::ColorTargetState {
                    format: FORMAT,
                    blend: None,
                    write_mask: wgpu::ColorWrites::ALL,
                })],
            }),
            multiview_mask: None,
            cache: None,
        });
        Renderer {
            device,
            queue,
            layout,
            pipeline,
            uniform,
            target: RefCell::new(None),
            points: RefCell::new(None),
        }
    }

    fn target(&self, width: u32, height: u32) -> wgpu::Texture {
        let mut slot = self.target.borrow_mut();
        if let Some((size, t)) = &*slot
            && *size == (width, height)
        {
            return t.clone();
        }
        let texture = self.device.create_texture(&wgpu::TextureDescriptor {
            label: Some("scatter frame"),
            size: wgpu::Extent3d { width, height, depth_or_array_layers: 1 },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: FORMAT,
            usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
            view_formats: &[],
        });
        *slot = Some(((width, height), texture.clone()));
        texture
    }

    async fn frame(
        &self,
        instances: &[u8],
        view: ViewUniform,
        width: u32,
        height: u32,
    ) -> Result<Vec<u8>, String> {
        let texture = self.target(width, height);
        let count = (instances.len() / INSTANCE_BYTES) as u32;
        let points = {
            let mut points = self.points.borrow_mut();
            if points.as_ref().is_none_or(|b| b.size() < instances.len().max(4) as u64) {
                *points = Some(self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("scatter points"),
                    size: (instances.len().max(4) as u64).next_power_of_two(),
                    usage: wgpu::BufferUsages::VERTEX | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                }));
            }
            points.clone().expect("allocated above")
        };
        if count > 0 {
            self.queue.write_buffer(&points, 0, instances);
        }
        self.queue.write_buffer(&self.uniform, 0, &view.bytes());
        let bind_group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("scatter view"),
            layout: &self.layout,
            entries: &[wgpu::BindGroupEntry { binding: 0, resource: self.uniform.as_entire_binding() }],
        });
        // Rows of a texture-to-buffer copy are padded to 256 bytes.
        let row = width * 4;
        let padded = row.div_ceil(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT) * wgpu::COPY_BYTES_PER_ROW_ALIGNMENT;
        let readback = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("scatter read-back"),
            size: u64::from(padded) * u64::from(height),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let frame = texture.create_view(&wgpu::TextureViewDescriptor::default());
        let mut encoder =
            self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("scatter") });
        {
            let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
                label: Some("scatter"),
                color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                    view: &frame,
                    depth_slice: None,
                    resolve_target: None,
                    ops: wgpu::Operations {
                        load: wgpu::LoadOp::Clear(wgpu::Color::WHITE),
                        store: wgpu::StoreOp::Store,
                    },
                })],
                depth_stencil_attachment: None,
                timestamp_writes: None,
                occlusion_query_set: None,
                multiview_mask: None,
            });
            if count > 0 {
                pass.set_pipeline(&self.pipeline);
                pass.set_bind_group(0, &bind_group, &[]);
                pass.set_vertex_buffer(0, points.slice(..));
                pass.draw(0..6, 0..count);
            }
        }
        encoder.copy_texture_to_buffer(
            wgpu::TexelCopyTextureInfo {
                texture: &texture,
                mip_level: 0,
                origin: wgpu::Origin3d::ZERO,
                aspect: wgpu::TextureAspect::All,
            },
            wgpu::TexelCopyBufferInfo {
                buffer: &readback,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(padded),
                    rows_per_image: None,
                },
            },
            wgpu::Extent3d { width, height, depth_or_array_layers: 1 },
        );
        self.queue.submit([encoder.finish()]);
        let slice = readback.slice(..);
        let mapped = js_sys::Promise::new(&mut |resolve, reject| {
            slice.map_async(wgpu::MapMode::Read, move |r| {
                let done = match r {
                    Ok(()) => resolve.call0(&wasm_bindgen::JsValue::NULL),
                    Err(e) => reject.call1(&wasm_bindgen::JsValue::NULL, &e.to_string().into()),
                };
                done.ok();
            });
        });
        JsFuture::from(mapped).await.map_err(|e| format!("scatter read-back failed: {e:?}"))?;
        let pixels = {
            let view = slice.get_mapped_range().map_err(|e| format!("scatter read-back failed: {e}"))?;
            let mut pixels = Vec::with_capacity((row * height) as usize);
            for r in view.chunks_exact(padded as usize) {
                pixels.extend_from_slice(&r[..row as usize]);
            }
            pixels
        };
        readback.unmap();
        Ok(pixels)
    }
}
