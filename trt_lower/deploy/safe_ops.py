"""The curated list of ATen operators a loaded graph may call (operators.py applies it), and the
arguments of each that must be checked before the call.

An operator is here when its kernel checks every index it reads at (gather, index_select,
embedding and index raise on an index out of range), or reads none, and allocates only what its
inputs' sizes or the checked size arguments below say. Left out on purpose: backward kernels (no
inference graph calls one; `embedding_dense_backward` writes out of bounds on a large index with
scale_grad_by_freq), kernels that return uninitialised memory (`empty`, `empty_strided`,
`resize`: see ZERO_FILLED), `as_strided` (any view of a storage), `segment_reduce` (unsafe=True
reads past its input), embedding_bag's offsets, `_grouped_mm`'s offsets, `masked_scatter` and
`searchsorted`'s sorter, `col2im` and the FFTs' output sizes. Elementwise operators are allowed by
their `pointwise` tag (operators.py), so they are not listed.
"""

from __future__ import annotations

# Overload packets ("aten.add"): every overload of each that is side-effect free (operators.py
# checks the schema).
SAFE = frozenset(
    f"aten.{name}"
    for name in """
    __lshift__ __rshift__ _adaptive_avg_pool2d _adaptive_avg_pool3d _cdist_forward _local_scalar_dense
    _log_softmax _native_batch_norm_legit _native_batch_norm_legit_no_training _pdist_forward _prelu_kernel
    _softmax _to_copy _unsafe_view _upsample_nearest_exact1d _upsample_nearest_exact2d
    _upsample_nearest_exact3d adaptive_avg_pool1d adaptive_max_pool1d adaptive_max_pool2d add addcdiv
    addcmul addmm alias all amax amin aminmax any arange argmax argmin argsort avg_pool1d avg_pool2d
    avg_pool3d baddbmm bitwise_and bitwise_left_shift bitwise_not bitwise_or bitwise_right_shift
    bitwise_xor bmm bucketize cat cdist channel_shuffle clamp clamp_max clamp_min clone constant_pad_nd
    contiguous convolution copy cosine_similarity cumsum cumprod detach diagonal div dot einsum embedding
    eq expand eye fill flip floor_divide full full_like gather ge gelu glu grid_sampler_2d grid_sampler_3d
    group_norm gt hardtanh histc hstack index index_copy index_fill index_put index_select instance_norm
    kthvalue layer_norm le leaky_relu lerp lift_fresh_copy linalg_vector_norm linear linspace log_softmax
    logsumexp lt masked_fill masked_select matmul max max_pool2d_with_indices max_pool3d_with_indices
    maximum mean median min minimum mm mul mv nan_to_num nansum native_channel_shuffle native_dropout
    native_group_norm native_layer_norm ne new_full new_ones new_zeros nonzero norm one_hot ones
    ones_like outer permute pixel_shuffle pixel_unshuffle pow prelu prod rand rand_like randint
    randint_like randn randn_like randperm reflection_pad1d reflection_pad2d reflection_pad3d relu
    remainder repeat replication_pad1d replication_pad2d replication_pad3d reshape rms_norm roll rsub
    scalar_tensor scaled_dot_product_attention scatter scatter_add scatter_reduce select select_scatter
    slice slice_scatter softmax sort split split_with_sizes squeeze stack std std_mean sub sum t
    threshold tile topk transpose tril triu type_as unbind unfold unsqueeze upsample_bicubic2d
    upsample_bilinear2d upsample_linear1d upsample_nearest1d upsample_nearest2d upsample_nearest3d
    upsample_trilinear3d var var_mean view vstack where zeros zeros_like
    hardswish hardsigmoid log_sigmoid log_sigmoid_forward copysign fmod fake_quantize_per_channel_affine_cachemask
    fake_quantize_per_tensor_affine_cachemask _fake_quantize_per_tensor_affine_cachemask_tensor_qparams
    """.split()
) | frozenset(
    # torch's primitives that converters map (elementwise, reductions, cat, casts); not its
    # constructors (`prims.empty_strided` returns uninitialised memory).
    f"prims.{name}"
    for name in """
    abs acos acosh add amax amin asin asinh atan atan2 atanh bitwise_and bitwise_not bitwise_or bitwise_xor
    cat ceil convert_element_type cos cosh div eq erf erfc exp exp2 expm1 floor fmax fmin fmod ge gt hypot
    isfinite le log log10 log1p log2 lt maximum minimum mul ne neg pow prod reciprocal remainder round
    rsqrt sign sin sinh sqrt sub sum tan tanh trunc var where
    """.split()
)

# Operators torch.export leaves in a graph besides core ATen: sizes read at run time, and the
# checks (those return nothing: they act by raising).
CHECKS = frozenset(
    {
        "aten.sym_size.int",
        "aten.sym_size.default",
        "aten.sym_stride.int",
        "aten.sym_stride.default",
        "aten.sym_numel.default",
        "aten.sym_storage_offset.default",
        "aten._assert_scalar.default",
        "aten.sym_constrain_range_for_size.default",
        "aten.sym_constrain_range.default",
        "aten._assert_tensor_metadata.default",
        "aten.item.default",
    }
)

# torch.distributed's functional collectives (what a tensor-parallel forward calls between
# engines) and the wait that completes each. Only these: the others take split sizes or a source
# rank from the file. Their group is never the file's: deploy/ranks.py binds each to the process
# group of the current job on load, and their string arguments are checked (operators.py).
COLLECTIVES = frozenset(
    f"_c10d_functional.{name}.default"
    for name in ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "wait_tensor")
)
# The reductions torch's functional collectives name as strings.
REDUCE_OPS = frozenset({"sum", "avg", "product", "min", "max"})

# Constructors of uninitialised memory, and the zero-filled forms a loaded graph calls instead
# (same arguments; memory_format is dropped where the form has none: the values are what count).
ZERO_FILLED = {
    "aten.empty.memory_format": "aten.zeros.default",
    "aten.empty_like.default": "aten.zeros_like.default",
    "aten.new_empty.default": "aten.new_zeros.default",
}

# Int arguments that pick a kernel's mode from an enum the kernel does not range-check.
_SAMPLER = {"interpolation_mode": frozenset({0, 1, 2}), "padding_mode": frozenset({0, 1, 2})}
MODES = {"aten.grid_sampler_2d": _SAMPLER, "aten.grid_sampler_3d": _SAMPLER}

# Arguments that size what a call allocates: their literal ints' product is bounded per call
# (arange's count is checked on its own: operators.py).
_SIZE = ("size",)
SIZES = {
    **{f"aten.{name}": _SIZE for name in ("ones", "zeros", "full", "new_ones", "new_zeros", "new_full")},
    **{f"aten.{name}": _SIZE for name in ("rand", "randn", "randint")},
    "aten.linspace": ("steps",),
    "aten.histc": ("bins",),
    "aten.randperm": ("n",),
    "aten.eye": ("n", "m"),
    "aten.one_hot": ("num_classes",),
    "aten.repeat": ("repeats",),
    "aten.tile": ("dims",),
    **{
        f"aten.{name}": ("output_size",)
        for name in (
            "upsample_nearest1d upsample_nearest2d upsample_nearest3d upsample_bilinear2d upsample_bicubic2d "
            "upsample_linear1d upsample_trilinear3d _upsample_nearest_exact1d _upsample_nearest_exact2d "
            "_upsample_nearest_exact3d adaptive_avg_pool1d _adaptive_avg_pool2d _adaptive_avg_pool3d "
            "adaptive_max_pool1d adaptive_max_pool2d"
        ).split()
    },
}

# Arguments that pad: each literal is bounded (a padding adds to a dim's size what it says).
PADDINGS = {
    "aten.constant_pad_nd": ("pad",),
    "aten.convolution": ("padding", "dilation", "output_padding"),
    **{f"aten.{kind}_pad{n}d": ("padding",) for kind in ("reflection", "replication") for n in (1, 2, 3)},
}
