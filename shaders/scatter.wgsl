// Point sprites for the PCA scatter of the browser app (web/src/views/scatter_gpu.rs).
//
// One instance per point: its 2-D PCA coordinates (data units) and an RGBA8 colour whose alpha
// byte flags a selected point (255) or not (0). Each instance expands to a square of
// `view.point.x` pixels (`view.point.y` when selected), drawn as two triangles from the six
// vertex indices. The square's top-left corner is the point's pixel, truncated towards zero as in
// the Canvas2D fallback, so both renderers put every point on the same pixels.
// Instances are drawn in buffer order: the app puts selected points last, on top.

struct View {
    // Data-space centre of the point cloud.
    centre: vec2<f32>,
    // Canvas pixels per data unit.
    scale: f32,
    _pad: f32,
    // Canvas size in pixels.
    canvas: vec2<f32>,
    // Side of an unselected and of a selected point, in pixels.
    point: vec2<f32>,
};

@group(0) @binding(0) var<uniform> view: View;

struct VertexOut {
    @builtin(position) position: vec4<f32>,
    @location(0) colour: vec4<f32>,
};

@vertex
fn vs_main(
    @builtin(vertex_index) corner: u32,
    @location(0) xy: vec2<f32>,
    @location(1) rgba: vec4<f32>,
) -> VertexOut {
    var corners = array<vec2<f32>, 6>(
        vec2<f32>(0.0, 0.0), vec2<f32>(1.0, 0.0), vec2<f32>(0.0, 1.0),
        vec2<f32>(0.0, 1.0), vec2<f32>(1.0, 0.0), vec2<f32>(1.0, 1.0),
    );
    let selected = rgba.a > 0.5;
    let size = select(view.point.x, view.point.y, selected);
    // Data → canvas pixels (y down), then the top-left pixel of the square.
    let px = vec2<f32>(
        (xy.x - view.centre.x) * view.scale + view.canvas.x * 0.5,
        view.canvas.y * 0.5 - (xy.y - view.centre.y) * view.scale,
    );
    let p = trunc(px) + corners[corner] * size;
    var out: VertexOut;
    out.position = vec4<f32>(p.x / view.canvas.x * 2.0 - 1.0, 1.0 - p.y / view.canvas.y * 2.0, 0.0, 1.0);
    out.colour = select(vec4<f32>(rgba.rgb, 1.0), vec4<f32>(0.0, 0.0, 0.0, 1.0), selected);
    return out;
}

@fragment
fn fs_main(in: VertexOut) -> @location(0) vec4<f32> {
    return in.colour;
}
