// What every measurement sends: the churn-tree example model and one single-row request.
export const MODEL_NAME = "churn-tree";
export const MODEL_FILE = `${MODEL_NAME}.onnx`;

/** One customer, 6 float features (the model's input `features` is FP32 [batch, 6]). */
export const ROW: readonly number[] = [3, 95, 4, 1, 0, 20];
export const REQUEST_BODY = JSON.stringify({ rows: [ROW] });
export const MODELPORT_PREDICT_PATH = `/v1/models/${MODEL_NAME}/predict`;
export const NAIVE_PREDICT_PATH = "/";
export const JSON_HEADERS = { "content-type": "application/json" };
