"""Image classifiers from timm, at the shapes the seeds train them (ImageNet: 224x224, 1000 classes)."""

from __future__ import annotations

from accelbench.workload import Batch, Workload


def resnet50() -> Workload:
    """ResNet-50 v1.5 (timm), 224x224 RGB, 1000 classes: the seeds' main training benchmark."""
    return _timm_classifier("resnet50")


def efficientnet_b0() -> Workload:
    """EfficientNet-B0 (timm), 224x224 RGB, 1000 classes."""
    return _timm_classifier("efficientnet_b0")


def mobilenetv3_large() -> Workload:
    """MobileNetV3-Large 1.0 (timm), 224x224 RGB, 1000 classes."""
    return _timm_classifier("mobilenetv3_large_100")


def efficientnet_b4() -> Workload:
    """EfficientNet-B4 (timm), 380x380 RGB (its native resolution), 1000 classes."""
    return _timm_classifier("efficientnet_b4", image_size=380)


def mobilenetv3_small() -> Workload:
    """MobileNetV3-Small 1.0 (timm), 224x224 RGB, 1000 classes."""
    return _timm_classifier("mobilenetv3_small_100")


def resnext101_32x4d() -> Workload:
    """ResNeXt-101 32x4d (timm), 224x224 RGB, 1000 classes."""
    return _timm_classifier("resnext101_32x4d")


def vit_base_16() -> Workload:
    """ViT-Base/16 (timm), 224x224 RGB, 1000 classes."""
    return _timm_classifier("vit_base_patch16_224")


def swin_tiny() -> Workload:
    """Swin-Tiny, window 7 (timm), 224x224 RGB, 1000 classes."""
    return _timm_classifier("swin_tiny_patch4_window7_224")


def _timm_classifier(timm_name: str, image_size: int = 224, num_classes: int = 1000) -> Workload:
    import torch
    import torch.nn.functional as F

    def build_model() -> torch.nn.Module:
        import timm

        return timm.create_model(timm_name, pretrained=False, num_classes=num_classes)

    def make_sample(gen: torch.Generator) -> Batch:
        return {
            "image": torch.randn(3, image_size, image_size, generator=gen),
            "label": torch.randint(num_classes, (), generator=gen),
        }

    def loss(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        return F.cross_entropy(model(batch["image"]), batch["label"])

    return Workload("images", build_model, make_sample, loss)
