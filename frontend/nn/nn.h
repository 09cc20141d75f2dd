#pragma once
// All of kiln's nn modules.
#include "frontend/nn/attention.h"
#include "frontend/nn/block.h"
#include "frontend/nn/init.h"
#include "frontend/nn/conv.h"
#include "frontend/nn/layers.h"
#include "frontend/nn/llama.h"
#include "frontend/nn/minigpt.h"
#include "frontend/nn/mlp.h"
#include "frontend/nn/module.h"
#include "frontend/nn/norms.h"
#include "frontend/nn/resnet.h"
#include "frontend/nn/vit.h"
