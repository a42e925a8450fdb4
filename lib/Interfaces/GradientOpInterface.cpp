//===- GradientOpInterface.cpp - Reverse-mode gradient rules -------------===//
#include "octet/Interfaces/GradientOpInterface.h"

#include "octet/Interfaces/GradientOpInterface.cpp.inc"
