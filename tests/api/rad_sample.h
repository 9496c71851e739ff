#pragma once
// The twelve lines of resnet3.rad (carma-spec.md Appendix A: ResNet-50, batch 128, 1 GPU,
// oracle 13236 MiB, Horus 28923.25, FakeTensor 10666.00724, GPUMemNet 24000), for the task-file
// tests and the fuzzer's seeds.

namespace carma::test_support {

inline constexpr const char* kResnet3Rad =
    "# assumption is that model.txt file is in this directory\n"
    "conda activate tf\n"
    "python /home/user/workloads/resnet50.py --batch_size 128\n"
    "resnet50_128.model\n"
    "/raid/datasets/imagenet\n"
    "128\n"
    "exclusive\n"
    "1\n"
    "13236\n"
    "28923.25\n"
    "10666.00724\n"
    "24000\n";

}  // namespace carma::test_support
