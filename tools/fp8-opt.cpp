//===- fp8-opt.cpp - Octet's compiler driver ------------------------------===//
#include "octet/Tools/Fp8OptMain.h"

int main(int argc, char **argv) { return octet::fp8OptMain(argc, argv); }
