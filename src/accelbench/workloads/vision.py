"""Image models at the shapes the seeds train them: timm classifiers (ImageNet: 224x224, 1000
classes unless said), a UNet for medical segmentation (monai) and EfficientDet detection (effdet).

The classifiers read images, so each also trains on an ImageFolder tree or webdataset shards;
LeNet-5 reads 28x28 digits (MNIST, sklearn:digits) for time-to-train.
"""

from __future__ import annotations

from typing import Any

from accelbench.workload import Batch, Images, Workload, classifier


def resnet50(image_size: int = 224, num_classes: int = 1000) -> Workload:
    """ResNet-50 v1.5 (timm), 224x224 RGB, 1000 classes: the PEARC '22 study's main training benchmark."""
    return timm_model("resnet50", image_size, num_classes)


def resnext101_32x4d(image_size: int = 224, num_classes: int = 1000) -> Workload:
    """ResNeXt-101 32x4d (timm), 224x224 RGB, 1000 classes."""
    return timm_model("resnext101_32x4d", image_size, num_classes)


def efficientnet_b0(image_size: int = 224, num_classes: int = 1000) -> Workload:
    """EfficientNet-B0 (timm), 224x224 RGB, 1000 classes."""
    return timm_model("efficientnet_b0", image_size, num_classes)


def efficientnet_b4(image_size: int = 380, num_classes: int = 1000) -> Workload:
    """EfficientNet-B4 (timm), 380x380 RGB (its native resolution), 1000 classes."""
    return timm_model("efficientnet_b4", image_size, num_classes)


def mobilenetv3_small(image_size: int = 224, num_classes: int = 1000) -> Workload:
    """MobileNetV3-Small 1.0 (timm), 224x224 RGB, 1000 classes."""
    return timm_model("mobilenetv3_small_100", image_size, num_classes)


def mobilenetv3_large(image_size: int = 224, num_classes: int = 1000) -> Workload:
    """MobileNetV3-Large 1.0 (timm), 224x224 RGB, 1000 classes."""
    return timm_model("mobilenetv3_large_100", image_size, num_classes)


def vit_base_16(image_size: int = 224, num_classes: int = 1000) -> Workload:
    """ViT-Base/16 (timm) pre-training shape: 224x224 RGB, 1000 classes."""
    return timm_model("vit_base_patch16_224", image_size, num_classes)


def vit_base_16_finetune(image_size: int = 384, num_classes: int = 1000) -> Workload:
    """ViT-Base/16 (timm) fine-tuning shape: 384x384 RGB (576 patches), 1000 classes."""
    return timm_model("vit_base_patch16_384", image_size, num_classes)


def swin_tiny(image_size: int = 224, num_classes: int = 1000) -> Workload:
    """Swin-Tiny, window 7 (timm), 224x224 RGB, 1000 classes."""
    return timm_model("swin_tiny_patch4_window7_224", image_size, num_classes)


def swin_base(image_size: int = 224, num_classes: int = 1000) -> Workload:
    """Swin-Base, window 7 (timm), 224x224 RGB, 1000 classes."""
    return timm_model("swin_base_patch4_window7_224", image_size, num_classes)


def swin_large(image_size: int = 224, num_classes: int = 1000) -> Workload:
    """Swin-Large, window 7 (timm), 224x224 RGB, 1000 classes."""
    return timm_model("swin_large_patch4_window7_224", image_size, num_classes)


def timm_model(
    name: str, image_size: int = 224, num_classes: int = 1000, **kwargs: Any
) -> Workload:
    """Any timm model by name (`timm/<name>`) as an image classifier, random weights; `kwargs`
    go to timm.create_model (drop_rate, depth, ...)."""
    import torch

    # Transformers (ViT, Swin) fix their patch grid when built; convolutional nets take any size.
    grid: dict[str, Any] = (
        {"img_size": image_size} if name.startswith(("vit_", "swin", "deit", "beit")) else {}
    )

    def build_model() -> torch.nn.Module:
        import timm

        return timm.create_model(name, pretrained=False, num_classes=num_classes, **grid, **kwargs)

    return classifier(Images(3, image_size, num_classes), build_model)


def lenet5(num_classes: int = 10) -> Workload:
    """LeNet-5 (LeCun et al. 1998), ReLU and max pooling, 28x28 greyscale digits, 10 classes."""
    import torch
    from torch import nn

    def build_model() -> torch.nn.Module:
        return nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 28 -> 14
            nn.Conv2d(6, 16, 5),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 14 -> 10 -> 5
            nn.Flatten(),
            nn.Linear(16 * 5 * 5, 120),
            nn.ReLU(),
            nn.Linear(120, 84),
            nn.ReLU(),
            nn.Linear(84, num_classes),
        )

    return classifier(Images(1, 28, num_classes, recipe="plain"), build_model)


def unet_medical(image_size: int = 512, num_classes: int = 2) -> Workload:
    """UNet (monai BasicUNet, 64-1024 channels) for EM segmentation (Graphcore's published results): 512x512 grey, 2 classes."""
    import torch
    import torch.nn.functional as F

    def build_model() -> torch.nn.Module:
        from monai.networks.nets import BasicUNet

        # The channel widths of Ronneberger et al.'s UNet, with same-size convolutions.
        return BasicUNet(
            spatial_dims=2,
            in_channels=1,
            out_channels=num_classes,
            features=(64, 128, 256, 512, 1024, 64),
        )

    def make_sample(gen: torch.Generator) -> Batch:
        return {
            "image": torch.rand(1, image_size, image_size, generator=gen),
            "mask": torch.randint(num_classes, (image_size, image_size), generator=gen),
        }

    def loss(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        return F.cross_entropy(model(batch["image"]), batch["mask"])

    return Workload("images", build_model, make_sample, loss)


def efficientdet_d0(image_size: int = 512, num_boxes: int = 8) -> Workload:
    """EfficientDet-D0 (effdet) object detection, 512x512 RGB, 90 COCO classes, 8 boxes per image."""
    return _efficientdet("efficientdet_d0", image_size, num_boxes)


def efficientdet_d4(image_size: int = 1024, num_boxes: int = 8) -> Workload:
    """EfficientDet-D4 (effdet) object detection, 1024x1024 RGB, 90 COCO classes, 8 boxes per image."""
    return _efficientdet("efficientdet_d4", image_size, num_boxes)


def _efficientdet(variant: str, image_size: int, num_boxes: int, num_classes: int = 90) -> Workload:
    import torch

    def build_model() -> torch.nn.Module:
        from effdet import create_model

        # The train bench computes focal and box losses; its labeler matches boxes to anchors.
        return create_model(
            variant,
            bench_task="train",
            bench_labeler=True,
            pretrained=False,
            pretrained_backbone=False,
            num_classes=num_classes,
            image_size=(image_size, image_size),
        )

    def make_sample(gen: torch.Generator) -> Batch:
        corner = torch.rand(num_boxes, 2, generator=gen) * image_size * 0.75
        extent = (torch.rand(num_boxes, 2, generator=gen) * 0.5 + 0.05) * image_size / 2
        return {
            "image": torch.randn(3, image_size, image_size, generator=gen),
            # effdet's box order is (y0, x0, y1, x1); classes count from 1.
            "bbox": torch.cat([corner, (corner + extent).clamp(max=image_size - 1)], dim=1),
            "cls": torch.randint(1, num_classes + 1, (num_boxes,), generator=gen).float(),
        }

    def loss(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        return model(batch["image"], {"bbox": batch["bbox"], "cls": batch["cls"]})["loss"]

    return Workload("images", build_model, make_sample, loss)
