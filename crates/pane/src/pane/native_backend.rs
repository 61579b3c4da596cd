//! [`NativePane`] as a [`PaneBackend`]: plain delegation.

use super::backend::{Backend, PaneBackend};
use super::{AttachHandle, NativePane, PaneError, PaneInfo, ScreenMeta};
use crate::screen::Screen;
use std::sync::Arc;

impl PaneBackend for NativePane {
    fn name(&self) -> &str {
        NativePane::name(self)
    }
    fn backend(&self) -> Backend {
        Backend::Native
    }
    fn info(&self) -> PaneInfo {
        NativePane::info(self)
    }
    fn with_screen_dyn(&self, f: &mut dyn FnMut(&mut Screen, &ScreenMeta)) {
        NativePane::with_screen(self, f)
    }
    fn generation(&self) -> u64 {
        NativePane::generation(self)
    }
    fn write_input(&self, bytes: &[u8]) -> Result<(), PaneError> {
        NativePane::write_input(self, bytes)
    }
    fn send_text(&self, text: &str, enter: bool) -> Result<(), PaneError> {
        NativePane::send_text(self, text, enter)
    }
    fn send_keys(&self, keys: &[String]) -> Result<(), PaneError> {
        NativePane::send_keys(self, keys)
    }
    fn resize(&self, cols: u16, rows: u16) -> Result<(), PaneError> {
        NativePane::resize(self, cols, rows)
    }
    fn spec_size(&self) -> (u16, u16) {
        NativePane::spec_size(self)
    }
    fn kill(&self) {
        NativePane::kill(self)
    }
    fn respawn(self: Arc<Self>) -> Result<u64, PaneError> {
        NativePane::respawn(&self)
    }
    fn attach(&self) -> AttachHandle {
        NativePane::attach(self)
    }
    fn attach_frame(&self, id: u64) -> Option<Vec<u8>> {
        NativePane::attach_frame(self, id)
    }
    fn detach(&self, id: u64) {
        NativePane::detach(self, id)
    }
    fn process_record(&self, descendants: Vec<super::Member>) -> Option<super::record::PaneRecord> {
        Some(super::record::PaneRecord::native(self, descendants))
    }
    fn members(&self) -> Vec<super::Member> {
        NativePane::members(self)
    }

    fn repaint(&self) -> Vec<u8> {
        NativePane::with_screen(self, |s, _| crate::screen::Renderer::new().frame(s))
    }
}
