//===- fp8-run.cpp - Runs a plan on the CPU reference backend -------------===//
#include "octet/runtime/Fp8RunMain.h"

int main(int argc, char **argv) { return octet::rt::fp8RunMain(argc, argv); }
