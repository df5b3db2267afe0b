// A shared library that is not a bench plugin at all.
extern "C" int not_a_plugin() { return 42; }
