"""Parameter counts and weight bytes per component of each family's real checkpoint, for the
peak device memory table of docs/generate.md ("Offloading and peak device memory").

Each component's class (diffusers 0.42 / transformers 5.23) is built on PyTorch's `meta` device
(no weights, no download) from the published checkpoint's config values, typed in below from
the hub configs (no hub access where this was run: a value that is wrong changes that row), and
its parameters counted; VAE and MoVQ count the decoder and `post_quant_conv` only (generation
never runs the encoder). Two counts are the model cards' (marked *): DeepFloyd's IF-I-XL (4.3 B)
and IF-II-L (1.2 B) UNets, and Kandinsky 3's whole MoVQ (0.27 B). Kandinsky 2.1's prior and
UNet are two components (its row's denoiser is their sum; offloaded, the UNet is the largest). Bytes = parameters × 2
(bf16/f16); SDXL's VAE is held in f32 (`force_upcast`), counted × 4. "Resident" sums every
component (all on the device, the default), "--offload" is the largest one (one at a time).
Weights only: activations are not included.

Prints the counts, then the Markdown table. Run:
    /work/venv/bin/python scripts/docs/peak_memory.py
"""
import torch
from diffusers import UNet2DConditionModel, AutoencoderKL, SD3Transformer2DModel, FluxTransformer2DModel, Kandinsky3UNet, VQModel, CogView4Transformer2DModel, Lumina2Transformer2DModel, PriorTransformer
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection, T5Config, T5EncoderModel, Gemma2Config, Gemma2Model, GlmConfig, GlmModel, XLMRobertaConfig, XLMRobertaModel, CLIPVisionConfig, CLIPVisionModelWithProjection
def n(m): return sum(p.numel() for p in m.parameters())
def meta(f):
    with torch.device("meta"): return f()
def vae_dec(**kw):
    m=meta(lambda: AutoencoderKL(down_block_types=["DownEncoderBlock2D"]*4, up_block_types=["UpDecoderBlock2D"]*4, block_out_channels=[128,256,512,512], layers_per_block=2, **kw))
    return n(m.decoder)+(n(m.post_quant_conv) if m.post_quant_conv is not None else 0)
clip=lambda h,ff,l,heads,proj=None,cls=CLIPTextModel: n(meta(lambda: cls(CLIPTextConfig(hidden_size=h,intermediate_size=ff,num_hidden_layers=l,num_attention_heads=heads,projection_dim=proj or h,vocab_size=49408,max_position_embeddings=77))))
t5=lambda d,ff,l,heads,dkv: n(meta(lambda: T5EncoderModel(T5Config(d_model=d,d_ff=ff,num_layers=l,num_heads=heads,d_kv=dkv,vocab_size=32128,feed_forward_proj="gated-gelu"))))
R={}
R["clip-l"]=clip(768,3072,12,12)
R["clip-l-proj"]=clip(768,3072,12,12,768,CLIPTextModelWithProjection)
R["openclip-h-23"]=clip(1024,4096,23,16)
R["bigG-proj"]=clip(1280,5120,32,20,1280,CLIPTextModelWithProjection)
R["t5-xxl"]=t5(4096,10240,24,64,64)
R["flan-ul2-enc"]=t5(4096,16384,32,16,256)
R["xlmr-large+proj"]=n(meta(lambda: XLMRobertaModel(XLMRobertaConfig(vocab_size=250002,hidden_size=1024,num_hidden_layers=24,num_attention_heads=16,intermediate_size=4096,max_position_embeddings=514,type_vocab_size=1),add_pooling_layer=False)))+1024*768+768+2*1024
R["gemma2-2b"]=n(meta(lambda: Gemma2Model(Gemma2Config(vocab_size=256000,hidden_size=2304,intermediate_size=9216,num_hidden_layers=26,num_attention_heads=8,num_key_value_heads=4,head_dim=256))))
R["glm4-9b"]=n(meta(lambda: GlmModel(GlmConfig(vocab_size=151552,hidden_size=4096,intermediate_size=13696,num_hidden_layers=40,num_attention_heads=32,num_key_value_heads=2,head_dim=128,attention_bias=True))))
sd15=dict(block_out_channels=[320,640,1280,1280],cross_attention_dim=768,attention_head_dim=8)
R["unet-sd15"]=n(meta(lambda: UNet2DConditionModel(**sd15)))
R["unet-sd21"]=n(meta(lambda: UNet2DConditionModel(block_out_channels=[320,640,1280,1280],cross_attention_dim=1024,attention_head_dim=[5,10,20,20],use_linear_projection=True)))
R["unet-sdxl"]=n(meta(lambda: UNet2DConditionModel(block_out_channels=[320,640,1280],down_block_types=["DownBlock2D","CrossAttnDownBlock2D","CrossAttnDownBlock2D"],up_block_types=["CrossAttnUpBlock2D","CrossAttnUpBlock2D","UpBlock2D"],transformer_layers_per_block=[1,2,10],attention_head_dim=[5,10,20],cross_attention_dim=2048,addition_embed_type="text_time",addition_time_embed_dim=256,projection_class_embeddings_input_dim=2816,use_linear_projection=True)))
R["vae4-dec"]=vae_dec(latent_channels=4)
R["vae16-dec"]=vae_dec(latent_channels=16,use_quant_conv=False,use_post_quant_conv=False)
R["sd3-medium"]=n(meta(lambda: SD3Transformer2DModel(sample_size=128,patch_size=2,in_channels=16,num_layers=24,attention_head_dim=64,num_attention_heads=24,joint_attention_dim=4096,caption_projection_dim=1536,pooled_projection_dim=2048,out_channels=16,pos_embed_max_size=192)))
R["sd35-large"]=n(meta(lambda: SD3Transformer2DModel(sample_size=128,patch_size=2,in_channels=16,num_layers=38,attention_head_dim=64,num_attention_heads=38,joint_attention_dim=4096,caption_projection_dim=2432,pooled_projection_dim=2048,out_channels=16,pos_embed_max_size=192,qk_norm="rms_norm")))
R["sd35-medium"]=n(meta(lambda: SD3Transformer2DModel(sample_size=128,patch_size=2,in_channels=16,num_layers=24,attention_head_dim=64,num_attention_heads=24,joint_attention_dim=4096,caption_projection_dim=1536,pooled_projection_dim=2048,out_channels=16,pos_embed_max_size=384,qk_norm="rms_norm",dual_attention_layers=tuple(range(13)))))
R["flux-dev"]=n(meta(lambda: FluxTransformer2DModel(patch_size=1,in_channels=64,num_layers=19,num_single_layers=38,attention_head_dim=128,num_attention_heads=24,joint_attention_dim=4096,pooled_projection_dim=768,guidance_embeds=True,axes_dims_rope=(16,56,56))))
R["flux-schnell"]=n(meta(lambda: FluxTransformer2DModel(patch_size=1,in_channels=64,num_layers=19,num_single_layers=38,attention_head_dim=128,num_attention_heads=24,joint_attention_dim=4096,pooled_projection_dim=768,guidance_embeds=False,axes_dims_rope=(16,56,56))))
R["cogview4"]=n(meta(lambda: CogView4Transformer2DModel(patch_size=2,in_channels=16,num_layers=28,attention_head_dim=128,num_attention_heads=32,out_channels=16,text_embed_dim=4096,time_embed_dim=512,condition_dim=256,pos_embed_max_size=128,sample_size=128)))
R["lumina2"]=n(meta(lambda: Lumina2Transformer2DModel(sample_size=128,patch_size=2,in_channels=16,hidden_size=2304,num_layers=26,num_refiner_layers=2,num_attention_heads=24,num_kv_heads=8,multiple_of=256,norm_eps=1e-5,axes_dim_rope=(32,32,32),axes_lens=(300,512,512),cap_feat_dim=2304)))
R["k3-unet"]=n(meta(lambda: Kandinsky3UNet(in_channels=4,time_embedding_dim=1536,groups=32,attention_head_dim=64,layers_per_block=3,block_out_channels=(384,768,1536,3072),cross_attention_dim=4096,encoder_hid_dim=4096)))
mq=meta(lambda: VQModel(in_channels=3,out_channels=3,down_block_types=["DownEncoderBlock2D","DownEncoderBlock2D","DownEncoderBlock2D","AttnDownEncoderBlock2D"],up_block_types=["AttnUpDecoderBlock2D","UpDecoderBlock2D","UpDecoderBlock2D","UpDecoderBlock2D"],block_out_channels=[128,256,256,512],layers_per_block=2,latent_channels=4,num_vq_embeddings=16384,vq_embed_dim=4,norm_type="spatial"))
R["movq-dec"]=n(mq.decoder)+n(mq.post_quant_conv)
R["movq-all"]=n(mq)
# Kandinsky 2.1 (kandinsky-2-1 and kandinsky-2-1-prior): M-CLIP is XLM-R large (its pooler unread)
# and a 1024 → 768 linear; the MoVQ is `mq` above (its decoder).
R["mclip"]=R["xlmr-large+proj"]-2*1024
R["k21-prior"]=n(meta(lambda: PriorTransformer(num_attention_heads=32,attention_head_dim=64,num_layers=20,embedding_dim=768,num_embeddings=77,additional_embeddings=4)))
R["k21-unet"]=n(meta(lambda: UNet2DConditionModel(in_channels=4,out_channels=8,addition_embed_type="text_image",down_block_types=("ResnetDownsampleBlock2D","SimpleCrossAttnDownBlock2D","SimpleCrossAttnDownBlock2D","SimpleCrossAttnDownBlock2D"),up_block_types=("SimpleCrossAttnUpBlock2D","SimpleCrossAttnUpBlock2D","SimpleCrossAttnUpBlock2D","ResnetUpsampleBlock2D"),mid_block_type="UNetMidBlock2DSimpleCrossAttn",block_out_channels=(384,768,1152,1536),layers_per_block=3,encoder_hid_dim=1024,encoder_hid_dim_type="text_image_proj",cross_attention_dim=768,attention_head_dim=64,resnet_time_scale_shift="scale_shift",class_embed_type=None)))
R["clip-l-vision-proj"]=n(meta(lambda: CLIPVisionModelWithProjection(CLIPVisionConfig(hidden_size=1024,intermediate_size=4096,num_hidden_layers=24,num_attention_heads=16,image_size=224,patch_size=14,projection_dim=768))))
for k,v in R.items(): print(f"{k:18s} {v:>14,d} {v/1e9:8.3f}B")
print()


G=2**30
C=R
fam=[
("SD 1.5",[("CLIP-L",123060480)],("UNet",859520964),("VAE decoder",49490199)),
("SD 2.1",[("OpenCLIP-H (23 layers)",340387840)],("UNet",865910724),("VAE decoder",49490199)),
("AltDiffusion-m9",[("XLM-R large + projection",559630080)],("UNet",859520964),("VAE decoder",49490199)),
("SDXL base 1.0, Playground v2.5",[("CLIP-L",123060480),("bigG + projection",694659840)],("UNet",2567463684),("VAE decoder (f32: force_upcast)",49490199*2)),
("SD 3 medium",[("CLIP-L + proj.",123650304),("bigG + proj.",694659840),("T5-XXL encoder",4762310656)],("transformer",2028328000),("VAE decoder",49545475)),
("SD 3.5 medium",[("CLIP-L + proj.",123650304),("bigG + proj.",694659840),("T5-XXL encoder",4762310656)],("transformer",2243171520),("VAE decoder",49545475)),
("SD 3.5 large",[("CLIP-L + proj.",123650304),("bigG + proj.",694659840),("T5-XXL encoder",4762310656)],("transformer",8056627520),("VAE decoder",49545475)),
("FLUX.1 dev",[("CLIP-L",123060480),("T5-XXL encoder",4762310656)],("transformer",11901408320),("VAE decoder",49545475)),
("FLUX.1 schnell",[("CLIP-L",123060480),("T5-XXL encoder",4762310656)],("transformer",11891178560),("VAE decoder",49545475)),
("CogView4-6B",[("GLM-4-9B (no head)",8779194368)],("transformer",6369118272),("VAE decoder",49545475)),
("Lumina-Image 2.0",[("Gemma-2-2B",2614341888)],("transformer",2609769152),("VAE decoder",49545475)),
("Kandinsky 3",[("Flan-UL2 encoder",8721797632)],("UNet",3055348228),("MoVQ (card: 0.27 B)*",270000000)),
("Kandinsky 2.1",[("CLIP-L + proj. (prior's)",123650304),("M-CLIP (XLM-R large + projection)",559628032)],("prior 1.022 + UNet 1.229:",1022030080+1228661768),("MoVQ decoder",40369175)),
("DeepFloyd IF-I-XL (stage I)",[("T5-XXL encoder",4762310656)],("UNet (card: 4.3 B)*",4300000000),None),
("IF-I-XL + IF-II-L (`--upscale`)",[("T5-XXL encoder × 2 (each stage's)",2*4762310656)],("UNets (cards: 4.3 + 1.2 B)*",5500000000),None),
]
print("| family | text encoders (B params) | denoiser | decoder | resident: all (GiB) | `--offload`: largest (GiB) |")
print("|---|---|---|---|---|---|")
for name,te,den,dec in fam:
    comps=[p for _,p in te]+[den[1]]+([dec[1]] if dec else [])
    tot=sum(comps)*2/G; peak=max(comps)*2/G
    tes=", ".join(f"{n} {p/1e9:.3f}" for n,p in te)
    decs=f"{dec[0]} {dec[1]/1e9:.3f}" if dec else "—"
    decs=decs.replace("VAE decoder (f32: force_upcast) 0.099", "VAE decoder 0.049 (held in f32: `force_upcast`)")
    if name.startswith("IF-I-XL +"):
        # Resident: both stages' four components; offloaded: the largest single one (a T5).
        tot=(2*4762310656+5500000000)*2/G; peak=4762310656*2/G
    if name=="Kandinsky 2.1":
        # The prior and the UNet are separate components: offloaded, the UNet is the largest. The
        # prior's image encoder (CLIP ViT-L vision + projection, 0.304 B) is on the device only
        # while loading, for the zero image's embedding.
        peak=1228661768*2/G
    print(f"| {name} | {tes} | {den[0]} {den[1]/1e9:.3f} | {decs} | {tot:.2f} | {peak:.2f} |")
