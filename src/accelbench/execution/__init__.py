"""How a step executes on a device: engines, the pipeline stage, the device helpers, the input
pipeline, data and model parallelism, optimizers, FLOP counting and a cell's polite stop."""
