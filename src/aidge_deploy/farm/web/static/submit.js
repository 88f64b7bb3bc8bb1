// The submit page: export options only for an ONNX model; a note while a large upload runs.
"use strict";
(function () {
  const form = document.getElementById("submit-form");
  if (!form) return;
  const onnx = document.getElementById("onnx-options");
  function sync() { onnx.disabled = form.elements.kind.value !== "onnx"; }
  for (const radio of form.querySelectorAll("input[name=kind]")) radio.addEventListener("change", sync);
  sync();
  form.addEventListener("submit", function () {
    document.getElementById("submit-note").hidden = false;
    document.getElementById("submit-button").disabled = true;
  });
})();
